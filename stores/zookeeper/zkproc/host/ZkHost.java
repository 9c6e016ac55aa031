// ZkHost runs the servers of one ZooKeeper ensemble as peers of one JVM,
// as ZooKeeper's own tests do (QuorumPeerTestBase.MainThread): zkproc's
// hosted ensembles (host.go). A peer is started from its zoo.cfg and shut
// down by its myid; a JVM that stays up costs a restarted server a fifth
// of the CPU of a JVM of its own.
//
// Commands come on standard input, one a line, each with a tag that its
// answer repeats:
//
//	<tag> start <myid> <zoo.cfg>  start the peer; answered once it runs
//	<tag> kill <myid>             shut the peer down; answered once its threads have ended
//
// Answers are "<tag> ok" or "<tag> err <why>"; a peer that ends of itself
// (its start failed, it gave up) is told as "- exit <myid> <why>". The log
// goes to standard error. The JVM exits when standard input closes.
//
// Built with go generate (host.go): javac --release 11, so that the JRE
// that runs ZooKeeper runs it; the classes are embedded in zkproc.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ExecutorService;

import org.apache.zookeeper.server.quorum.QuorumPeer;
import org.apache.zookeeper.server.quorum.QuorumPeerConfig;
import org.apache.zookeeper.server.quorum.QuorumPeerMain;

public final class ZkHost {
    private static final PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    private static final ConcurrentHashMap<String, Peer> peers = new ConcurrentHashMap<>();
    private static Field quorumPeerField;

    // A peer: QuorumPeerMain.runFromConfig on a thread of its own, which
    // returns once the peer has shut down.
    static final class Peer {
        final String id;
        final QuorumPeerMain main = new QuorumPeerMain();
        final Thread thread;
        volatile Throwable failure;
        volatile boolean killed;

        Peer(String id, QuorumPeerConfig config) {
            this.id = id;
            this.thread = new Thread(() -> {
                try {
                    main.runFromConfig(config);
                } catch (Throwable t) {
                    failure = t;
                }
                peers.remove(id, this);
                if (!killed) {
                    String why = failure == null ? "it shut down" : describe(failure);
                    System.err.println("ZkHost: peer " + id + " ended: " + why);
                    answer("- exit " + id + " " + why);
                }
            }, "ZkHost-peer-" + id);
        }

        // peer is the QuorumPeer runFromConfig made, null before.
        QuorumPeer peer() throws IllegalAccessException {
            return (QuorumPeer) quorumPeerField.get(main);
        }
    }

    public static void main(String[] args) throws Exception {
        quorumPeerField = QuorumPeerMain.class.getDeclaredField("quorumPeer");
        quorumPeerField.setAccessible(true);
        ExecutorService pool = Executors.newCachedThreadPool();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.trim().split(" ", 4);
            if (f.length < 3) {
                answer((f.length > 0 ? f[0] : "-") + " err malformed command: " + line);
                continue;
            }
            pool.execute(() -> {
                try {
                    switch (f[1]) {
                        case "start":
                            if (f.length < 4) {
                                throw new IllegalArgumentException("start wants a myid and a zoo.cfg");
                            }
                            start(f[2], f[3]);
                            break;
                        case "kill":
                            kill(f[2]);
                            break;
                        default:
                            throw new IllegalArgumentException("unknown command " + f[1]);
                    }
                    answer(f[0] + " ok");
                } catch (Throwable t) {
                    answer(f[0] + " err " + describe(t));
                }
            });
        }
        // Standard input closed: the process that started this one is
        // done with it.
        Runtime.getRuntime().halt(0);
    }

    // start starts peer id from the zoo.cfg at path and returns once its
    // QuorumPeer thread runs (its client port bound, its election begun),
    // or fails with why it ended.
    static void start(String id, String path) throws Exception {
        QuorumPeerConfig config = new QuorumPeerConfig();
        config.parse(path);
        Peer p = new Peer(id, config);
        if (peers.putIfAbsent(id, p) != null) {
            throw new IllegalStateException("peer " + id + " runs");
        }
        p.thread.start();
        for (;;) {
            QuorumPeer q = p.peer();
            if (q != null && q.isAlive()) {
                return;
            }
            if (!p.thread.isAlive()) {
                throw new IllegalStateException("peer " + id + " ended: " + (p.failure == null ? "it shut down" : describe(p.failure)));
            }
            Thread.sleep(2);
        }
    }

    // kill shuts peer id down and returns once its thread has ended.
    static void kill(String id) throws Exception {
        Peer p = peers.get(id);
        if (p == null) {
            return;
        }
        p.killed = true;
        QuorumPeer q = p.peer();
        if (q != null) {
            q.shutdown();
        }
        p.thread.join();
        peers.remove(id, p);
    }

    static void answer(String line) {
        synchronized (out) {
            out.println(line);
        }
    }

    // describe is t and its causes, on one line.
    static String describe(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (b.length() > 0) {
                b.append(": ");
            }
            b.append(c.getClass().getSimpleName()).append(' ').append(String.valueOf(c.getMessage()));
            if (c.getCause() == c) {
                break;
            }
        }
        return b.toString().replace('\n', ' ');
    }
}
