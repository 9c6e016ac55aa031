// Package zkproc runs throwaway Apache ZooKeeper ensembles for tests and
// for the harness: N servers (3 by default) as local JVMs on free loopback
// ports, each with a directory of its own (its zoo.cfg, its data directory
// with its myid, its log) in one temporary directory, in memory under
// /dev/shm where there is one: a server acknowledges a write once its
// transaction log is fsynced, which a disk makes cost milliseconds, and a
// throwaway ensemble outlives no host.
// Faults are first-class: kill a server (SIGKILL), restart it on its data
// directory or on an emptied one, pause and resume it (SIGSTOP, SIGCONT),
// find the leader and kill it. Partitions are cut through the harness's TCP proxy in front of
// a client address, not here. A hosted ensemble (Options.Hosted, host.go)
// runs its servers as peers of one JVM, which stays up while they are
// killed and restarted.
//
// The servers are Debian's zookeeper package (ZooKeeper 3.8, its jars in
// /usr/share/java; scripts/ensure-zookeeper.sh installs it), run as
// "java -cp ... org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg"
// with a small heap and the JVM's quick start (C1 only, class data
// sharing): a three-server ensemble serves about 2s after Start on two
// cores. Health and roles come from the four-letter words (srvr, conf)
// over TCP: the package uses no ZooKeeper client.
//
// Every server runs with a tickTime of 200ms (ZooKeeper's default is 2s):
// a session's timeout is held between 400ms and 4s (2 and 20 ticks), a
// follower that hears nothing from its leader for 1s (syncLimit, 5 ticks)
// drops it, and a killed leader is replaced in about half a second: its
// followers see its sockets close at once, and their election waits 200ms
// for a better vote once a quorum agrees (finalizeWait, a constant of
// ZooKeeper 3.8), whatever the tick. A shorter tick would speed up no
// fault, only narrow the silence a follower survives on a loaded machine;
// TestNoElectionUnderLoad holds the timings to no election with every
// core busy.
// Servers die with the process that started them (Pdeathsig), Close
// removes every process and directory, a SIGINT closes every open
// ensemble (internal/tooling/cleanup), and the directories of a run
// killed before it could close are removed by the next run's first Start.
package zkproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/procid"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// The defaults of Options.
const (
	DefaultServers      = 3
	DefaultTickTime     = 200 * time.Millisecond
	DefaultStartTimeout = time.Minute
)

// The backends of Options.Backend (internal/tooling/backends's).
const (
	BackendProcess = backends.Process
	BackendDocker  = backends.Docker
)

// Options configure an ensemble.
type Options struct {
	// Servers is the number of servers; 0 means DefaultServers. One
	// server runs standalone.
	Servers int
	// TickTime is ZooKeeper's tickTime, its unit of time (in whole
	// milliseconds); 0 means DefaultTickTime.
	TickTime time.Duration
	// StartTimeout bounds the wait for health at each start and restart
	// when the context given has no earlier deadline; 0 means
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// Backend is BackendProcess ("" too): servers are local processes; or
	// BackendDocker: each server runs in a container of an image built
	// from the host's JRE and jars (see docker.go), on a network of the
	// ensemble's own.
	Backend string
	// Label names a docker ensemble in its labels (dockerbox.LabelName).
	Label string
	// Config are lines ("key=value") added to every server's zoo.cfg after
	// the ones Start writes; a key given again overrides.
	Config []string
	// Hosted runs the servers as peers of one JVM (host.go), on the
	// process backend: a killed server is shut down inside it and a
	// restarted one started there again, for a fifth of the CPU of a JVM
	// of its own. Such a server cannot be paused alone (ErrHosted).
	Hosted bool
}

// Ensemble is a running ZooKeeper ensemble. Its methods are safe for
// concurrent use.
type Ensemble struct {
	// Dir is the temporary directory that holds each server's directory;
	// empty on the docker backend.
	Dir string
	// Java and Jar are the java binary and the ZooKeeper jar the servers
	// run.
	Java, Jar string

	classpath string
	inst      installation
	// archive is the class data archive local servers map (cds.go); nil
	// on the docker backend.
	archive *archive
	opts    Options
	ports   []int // reserved by freePorts
	servers []*Server
	closed  atomic.Bool
	// closeOnce runs close once; closeErr is its result.
	closeOnce sync.Once
	closeErr  error
	// net is the docker backend's network, nil on the process backend.
	net *dockerbox.Network
	// host is a hosted ensemble's JVM (Options.Hosted), nil otherwise.
	host *host
}

// Server is one ZooKeeper server of an Ensemble.
type Server struct {
	// Index is its place in the ensemble (0-based) and ID its myid
	// (Index+1).
	Index, ID int
	// DataDir is its dataDir (holding myid and version-2), ConfigPath its
	// zoo.cfg and LogPath the file its output goes to, kept across
	// restarts. On the docker backend they are paths in the server's
	// container and LogPath is empty (LogTail reads the container's log).
	DataDir, ConfigPath, LogPath string

	e    *Ensemble
	host string // its address: 127.0.0.1, or its container's
	// clientPort, peerPort and electionPort are the ports it serves
	// clients, its leader's followers and elections on.
	clientPort, peerPort, electionPort int

	// Proc is the server's JVM, here or in its container, and the
	// faults done to it (Kill, Stop, Cont).
	serverproc.Proc
}

// Start launches the servers and returns once a quorum serves with one
// leader: every server answers srvr with its mode, and one of them says
// leader (standalone, for a single server). ctx bounds the whole start. An
// ensemble that does not come up is an error with the tail of the failing
// server's log; where ZooKeeper or java is missing, the error says how to
// install them.
func Start(ctx context.Context, opts Options) (*Ensemble, error) {
	inst, err := install()
	if err != nil {
		return nil, err
	}
	if opts.Servers < 0 {
		return nil, fmt.Errorf("zkproc: %d servers", opts.Servers)
	}
	if opts.Servers == 0 {
		opts.Servers = DefaultServers
	}
	if opts.Hosted && opts.Servers == 1 {
		return nil, errors.New("zkproc: a hosted ensemble has more than one server: a server alone runs standalone, in a JVM of its own")
	}
	if opts.TickTime <= 0 {
		opts.TickTime = DefaultTickTime
	}
	if opts.TickTime < time.Millisecond {
		return nil, fmt.Errorf("zkproc: tickTime %v under 1ms", opts.TickTime)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	opts.Config = slices.Clone(opts.Config)
	for _, l := range opts.Config {
		if strings.ContainsAny(l, "\n\r") || strings.TrimSpace(l) == "." {
			return nil, fmt.Errorf("zkproc: config line %q: a line break, or a line the docker backend cannot write", l)
		}
	}
	switch opts.Backend {
	case "", BackendProcess:
	case BackendDocker:
		if opts.Hosted {
			return nil, errors.New("zkproc: a hosted ensemble runs on the process backend only")
		}
		return startDocker(ctx, inst, opts)
	default:
		return nil, fmt.Errorf("zkproc: backend %q: want %q or %q", opts.Backend, BackendProcess, BackendDocker)
	}
	sweep.Do(func() { RemoveStale() })
	return serverproc.OnFreePorts(ctx, func() (*Ensemble, error) { return start(ctx, inst, opts) })
}

func start(ctx context.Context, inst installation, opts Options) (*Ensemble, error) {
	dir, err := procid.MkdirTemp(dirPrefix)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3 * opts.Servers)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e := &Ensemble{Dir: dir, Java: inst.java, Jar: inst.jar, classpath: inst.classpath, opts: opts, ports: ports, inst: inst}
	if opts.Backend != BackendDocker {
		e.archive = archiveOf(inst)
	}
	for i := range opts.Servers {
		s := &Server{Index: i, ID: i + 1, e: e, host: "127.0.0.1",
			clientPort: ports[3*i], peerPort: ports[3*i+1], electionPort: ports[3*i+2]}
		sdir := filepath.Join(dir, s.Name())
		s.DataDir = filepath.Join(sdir, "data")
		s.ConfigPath = filepath.Join(sdir, "zoo.cfg")
		s.LogPath = filepath.Join(sdir, "zookeeper.log")
		s.What, s.Timeout = "zkproc: server "+s.Name(), opts.StartTimeout
		e.servers = append(e.servers, s)
	}
	// Tracked, its ports and servers set, before anything runs: a signal
	// in the middle of the start removes what was made (a failed start's
	// Close untracks it), and reads no field the start still writes.
	cleanup.Track(e)
	fail := func(err error) (*Ensemble, error) {
		e.Close()
		return nil, err
	}
	for _, s := range e.servers {
		if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(filepath.Join(s.DataDir, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(s.ConfigPath, []byte(strings.Join(s.config(), "\n")+"\n"), 0o644); err != nil {
			return fail(err)
		}
	}
	if opts.Hosted {
		h, err := e.startHost(filepath.Join(dir, "zookeeper.log"))
		if err != nil {
			return fail(err)
		}
		e.host = h
		for _, s := range e.servers {
			s.LogPath = h.logPath
			s.SetBox(&peer{h: h, id: s.ID})
		}
	}
	for _, s := range e.servers {
		if err := s.launch(); err != nil {
			return fail(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := e.waitHealthy(wctx, e.servers); err != nil {
		return fail(err)
	}
	if err := e.identify(wctx); err != nil {
		return fail(err)
	}
	return e, nil
}

// config are the lines of s's zoo.cfg.
func (s *Server) config() []string {
	o := s.e.opts
	lines := []string{
		"tickTime=" + strconv.FormatInt(o.TickTime.Milliseconds(), 10),
		"initLimit=20", // ticks for a follower to connect and sync
		"syncLimit=5",  // ticks a follower may lag or stay silent
		"dataDir=" + s.DataDir,
		"clientPort=" + strconv.Itoa(s.clientPort),
		"maxClientCnxns=0", // no limit per client address (60 by default)
		"admin.enableServer=false",
		"4lw.commands.whitelist=*",
	}
	if s.e.net == nil {
		lines = append(lines, "clientPortAddress="+s.host)
	}
	if len(s.e.servers) > 1 {
		for _, p := range s.e.servers {
			lines = append(lines, fmt.Sprintf("server.%d=%s:%d:%d", p.ID, p.host, p.peerPort, p.electionPort))
		}
	}
	return append(lines, o.Config...)
}

// javaArgs are the arguments of s's java: a heap of 128MB at most with
// the serial collector (three servers share two cores), C1 alone and
// class data sharing (a start in a fraction of the time), a fresh data
// directory trusted without a snapshot, no admin server (its port 8080
// would collide), and the log, with times, on stderr. A server that hears
// nothing in an election asks again after 200ms, then twice as long each
// time, up to 1s (or 5 ticks) here rather than a minute: the last JVM of
// three to start, on a loaded machine, is seconds behind the others. The
// last wait of an election, 200ms for a better vote once a quorum agrees,
// is a constant of ZooKeeper 3.8's FastLeaderElection (finalizeWait) that
// no property changes.
func (s *Server) javaArgs() []string {
	return s.e.jvmArgs(s.e.classpath, filepath.Dir(s.ConfigPath), "org.apache.zookeeper.server.quorum.QuorumPeerMain", s.ConfigPath)
}

// jvmArgs are the arguments of a java that runs main (with args) on the
// class path cp, its log's directory logDir: a server's, or a hosted
// ensemble's JVM.
func (e *Ensemble) jvmArgs(cp, logDir string, main ...string) []string {
	return append(append(slices.Clone(jvmFlags), "-Xshare:auto",
		"-XX:-UsePerfData", "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.snapshot.trust.empty=true",
		"-Dzookeeper.fastleader.maxNotificationInterval="+strconv.FormatInt(max(1000, 5*e.opts.TickTime.Milliseconds()), 10),
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dzookeeper.log.dir="+logDir,
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-cp", cp,
	), main...)
}

// javaOptions reports the variables the JVM reads as options: none of
// this process's.
func javaOptions(kv string) bool {
	return strings.HasPrefix(kv, "JAVA_TOOL_OPTIONS=") || strings.HasPrefix(kv, "JDK_JAVA_OPTIONS=") || strings.HasPrefix(kv, "_JAVA_OPTIONS=")
}

// inBox is what starts s in its box from its java's args: java and them
// in a container, its zoo.cfg alone in a hosted ensemble's JVM.
func (s *Server) inBox(args []string) []string {
	if s.e.host != nil {
		return []string{s.ConfigPath}
	}
	return append([]string{s.e.Java}, args...)
}

// launch starts s's process (and returns at once: a server alone cannot
// serve until a quorum is up).
func (s *Server) launch() error {
	args := s.javaArgs()
	return s.Launch(serverproc.Spec{
		Check: func() error {
			if s.e.closed.Load() { // Close kills what started before this
				return errors.New("zkproc: ensemble closed")
			}
			return nil
		},
		Local: append(append([]string{s.e.Java}, s.e.archive.flags(s.e.inst)...), args...), InBox: s.inBox(args),
		Dir: filepath.Dir(s.ConfigPath), LogPath: s.LogPath, DropEnv: javaOptions,
	})
}

// identify checks, with conf, that each server answering on a server's
// client address is that server: its serverId (in an ensemble of more
// than one), and on the process backend its data directory.
func (e *Ensemble) identify(ctx context.Context) error {
	for _, s := range e.servers {
		out, err := FourLetter(ctx, s.Addr(), "conf")
		if err != nil {
			return fmt.Errorf("zookeeper server %s conf: %w", s.Name(), err)
		}
		conf := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
				conf[k] = v
			}
		}
		if id, ok := conf["serverId"]; ok && len(e.servers) > 1 && id != strconv.Itoa(s.ID) { // 0 standalone
			return fmt.Errorf("%w: zookeeper on %s is server %s, not %s (id %d): another ensemble holds the port", serverproc.ErrPortTaken, s.Addr(), id, s.Name(), s.ID)
		}
		if d := conf["dataDir"]; e.net == nil && !strings.HasPrefix(d, s.DataDir) {
			return fmt.Errorf("%w: zookeeper on %s keeps its data in %q, not %s: another ensemble holds the port", serverproc.ErrPortTaken, s.Addr(), d, s.DataDir)
		}
	}
	return nil
}

// Addrs are the servers' client addresses ("127.0.0.1:port"; a
// container's address on the docker backend), in server order.
func (e *Ensemble) Addrs() []string {
	out := make([]string, len(e.servers))
	for i, s := range e.servers {
		out[i] = s.Addr()
	}
	return out
}

// Servers returns the servers, in order.
func (e *Ensemble) Servers() []*Server { return slices.Clone(e.servers) }

// Server returns server i (0-based); it panics when there is none.
func (e *Ensemble) Server(i int) *Server { return e.servers[i] }

// Backend names the backend the ensemble runs on.
func (e *Ensemble) Backend() string {
	if e.net != nil {
		return BackendDocker
	}
	return BackendProcess
}

// Hosted reports whether the servers are peers of one JVM
// (Options.Hosted).
func (e *Ensemble) Hosted() bool { return e.host != nil }

// Describe tells what runs the servers: "3 server processes
// 127.0.0.1:p1,... (ZooKeeper 3.8.0)", "1 server process, standalone,
// ..." or "3 containers (network ...) ...".
func (e *Ensemble) Describe() string {
	what := "server processes"
	switch {
	case e.net != nil:
		what = "containers (network " + e.net.Name + ")"
		if len(e.servers) == 1 {
			what = "container (network " + e.net.Name + "), standalone,"
		}
	case e.host != nil:
		what = "servers in one JVM"
		if len(e.servers) == 1 {
			what = "server in a JVM, standalone,"
		}
	case len(e.servers) == 1:
		what = "server process, standalone,"
	}
	return fmt.Sprintf("%d %s %s (ZooKeeper %s)", len(e.servers), what, strings.Join(e.Addrs(), ","), versionOf(e.Jar))
}

// Close kills every server and removes Dir (on the docker backend, the
// containers and the network). It is safe to call more than once.
func (e *Ensemble) Close() error {
	// A second Close (the program's, after the signal handler's) waits for
	// the first: a process that exits once it returns must not cut the
	// removal of the directory short.
	e.closeOnce.Do(func() { e.closeErr = e.close() })
	return e.closeErr
}

// Closed reports whether Close ran (the program's, or a signal's).
func (e *Ensemble) Closed() bool { return e.closed.Load() }

func (e *Ensemble) close() error {
	e.closed.Store(true)
	defer cleanup.Untrack(e)
	if e.host != nil { // every peer with it
		e.host.kill()
	}
	var wg sync.WaitGroup
	for _, s := range e.servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.Kill() }()
	}
	wg.Wait()
	if e.net != nil {
		return e.closeDocker()
	}
	release(e.ports)
	return os.RemoveAll(e.Dir)
}

// dirPrefix starts the name of the temporary directories: dirPrefix + pid
// + "-" + start time + "-" + random, naming the process that owns it.
const dirPrefix = "locklab-zk-"

var sweep sync.Once

// RemoveStale removes the temporary directories of ensembles whose owning
// process is gone (a run killed before it could close them; its servers
// died with it). Those of live processes stay. Start calls it once per
// process; it returns the directories it removed.
func RemoveStale() []string { return procid.RemoveStaleTemp(dirPrefix) }
