// The ZooKeeper store: the zookeeper family's locks (strategies/zklock) on
// a real three-server ensemble. Each client gets a *zk.Conn of its own
// whose every request is a step: the connection's socket (socket.go)
// holds each request the client's connection writes until the scheduler
// grants it, and reads each answer into the step's event. Heartbeats
// (pings), the connection's handshake and its watches' re-registration
// are not steps.
//
// Sessions expire on the run's virtual clock, as etcd's leases do: the
// servers are given a session timeout far longer than any run, and when a
// time step passes a client's session timeout (the TTL every scenario's
// lock has) while the client sends nothing (crashed, cut off or paused),
// the store ends the session on the servers itself: it opens a
// connection with the session's id and password and closes the session
// there, which is what the leader does when a session's timer runs out.
// The session's ephemeral nodes go with it; the client learns of it when
// its own connection reaches a server again.

package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/strategies/zklock"
)

// sessionTimeout is the timeout each client's connection asks the servers
// for (the ensemble's maxSessionTimeout allows it): no run lasts it.
const sessionTimeout = 60 * time.Second

// maxResponse bounds the buffer a connection reads the servers' answers
// into. go-zookeeper allocates 1.5 MiB for it on each connection unless
// told less, and a run opens a connection per client: zeroing those
// buffers, and the collections they brought on, were a large share of
// the harness's own CPU on the ZooKeeper rows (zk-recipe's cells that
// fault no server, back to back: 7% less wall time, the largest process
// 123 MB where it was 176). A run's answers are a lock's few nodes and
// their names; one that did not fit would fail the run with
// go-zookeeper's error, not pass unseen.
const maxResponse = 64 << 10

// strategyNames are the zookeeper family's strategies, whose lock paths
// the store empties and reads.
var strategyNames = []string{zklock.RecipeName, zklock.EphemeralName, zklock.GolibName}

// zkStore is one ensemble.
type zkStore struct {
	node  *Node
	admin *zk.Conn
	// resets is the node's count of fresh starts (Node.resets) that
	// admin was dialled after.
	resets int64

	mu sync.Mutex
	// clients are the current run's; now is the store's virtual clock;
	// lockKey the key the runs lock; guids name the protected nodes'
	// GUIDs in the timeline, by client.
	clients []*zkClient
	now     time.Duration
	lockKey string
	guids   map[string]string
}

func newStore(n *Node) (*zkStore, error) {
	resets := n.resets.Load()
	admin, err := dialAdmin(n)
	if err != nil {
		return nil, err
	}
	return &zkStore{node: n, admin: admin, resets: resets, guids: map[string]string{}}, nil
}

// dialAdmin opens the store's own connection to n's ensemble.
func dialAdmin(n *Node) (*zk.Conn, error) {
	hosts := newHosts(n)
	admin, _, err := connect(n, hosts, hosts.dial)
	return admin, err
}

// connect opens a connection to n's ensemble, to the servers hosts
// gives, dialed by dial: the store's and its clients' alike.
func connect(n *Node, hosts *fixedHosts, dial zk.Dialer) (*zk.Conn, <-chan zk.Event, error) {
	return zk.Connect(n.Ensemble.Addrs(), sessionTimeout, zk.WithLogger(nopLogger{}),
		zk.WithHostProvider(hosts), zk.WithDialer(dial), zk.WithMaxBufferSize(maxResponse))
}

var _ harness.Store = (*zkStore)(nil)

// zkClient is a client's connection, and what the store knows of its
// session.
type zkClient struct {
	s     *zkStore
	c     *harness.Client
	conn  *zk.Conn
	hosts *fixedHosts

	mu sync.Mutex
	// bound: the client's requests are steps (false once its run is
	// over); dead: it crashed, its process is gone, so it dials nothing;
	// sess is its session as the servers last told it; silent how long,
	// on the store's clock, the servers have not heard from it; sock its
	// current socket.
	bound  bool
	dead   bool
	sess   session
	silent time.Duration
	sock   *socket
	// changed is signalled with each handshake's answer (sess). sending
	// counts the requests of the client that wait for the scheduler's
	// grant.
	changed *sync.Cond
	sending int
	// owns are the ephemeral nodes the client's session created;
	// watching is the node whose watch its zk-golib Lock waits for
	// (wait.go).
	owns     []string
	watching string
}

// Connect gives client c a connection of its own to the ensemble, whose
// requests are its steps.
func (s *zkStore) Connect(c *harness.Client, cfg *locklab.Config) error {
	cl := &zkClient{s: s, c: c, bound: true, hosts: newHosts(s.node)}
	cl.changed = sync.NewCond(&cl.mu)
	conn, events, err := connect(s.node, cl.hosts, cl.dial)
	if err != nil {
		return err
	}
	cl.conn = conn
	// The run starts once the client has its session: the handshake is
	// no step, and a request must not wait for it. The wait ends with the
	// run too: an interrupt closes the servers, and a session never comes.
	ctx, cancel := context.WithTimeoutCause(c.Context(), sessionWait,
		fmt.Errorf("none after %v", sessionWait))
	defer cancel()
	if err := awaitSession(ctx, events); err != nil {
		conn.Close()
		return err
	}
	s.mu.Lock()
	s.clients = append(s.clients, cl)
	s.mu.Unlock()
	cfg.Store = conn
	return nil
}

// dial opens the client's socket to a server; a crashed client dials
// nothing. One cut off from the ensemble dials (its handshakes and
// heartbeats are no steps, and its session expires on the run's clock
// whatever they do), but the scheduler refuses each of its requests, and
// the refused request closes the socket, as a cut network would: the
// client's connection fails it, and dials again.
func (cl *zkClient) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	cl.mu.Lock()
	dead := cl.dead
	cl.mu.Unlock()
	if dead {
		cl.hosts.mu.Lock()
		cl.hosts.refused[addr] = true // every server refuses: go-zookeeper waits between rounds
		cl.hosts.mu.Unlock()
		return nil, errors.New("zookeeper: the client's process is gone")
	}
	nc, err := cl.hosts.dial(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	sock := &socket{Conn: nc, cl: cl, pending: map[int32]*pendingReq{}}
	cl.mu.Lock()
	cl.sock = sock
	cl.mu.Unlock()
	return sock, nil
}

// step returns the client its requests are steps of, nil once its run is
// over.
func (cl *zkClient) step() *harness.Client {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if !cl.bound {
		return nil
	}
	return cl.c
}

// Key notes the key the runs lock: what Empty deletes.
func (s *zkStore) Key(key string) string {
	s.mu.Lock()
	s.lockKey = key
	s.mu.Unlock()
	return key
}

// Crashed closes c's socket and refuses its dials: a process that dies
// closes its sockets, and its session lives on until its timeout.
func (s *zkStore) Crashed(c *harness.Client) {
	s.mu.Lock()
	var cl *zkClient
	for _, x := range s.clients {
		if x.c == c {
			cl = x
		}
	}
	s.mu.Unlock()
	if cl == nil {
		return
	}
	cl.mu.Lock()
	cl.dead = true
	sock := cl.sock
	cl.mu.Unlock()
	if sock != nil {
		sock.Conn.Close()
	}
}

// Probe returns the node that holds the lock on key, as a timeline shows
// it: the lowest sequence number under a recipe's path (zk-recipe,
// zk-golib), or the node at zk-ephemeral's path with its czxid; nil when
// none does.
func (s *zkStore) Probe(_ context.Context, _ int, key string) (any, error) {
	n, err := s.lockNode(key)
	switch {
	case err != nil || n == nil:
		return nil, err
	case n.first != "":
		return s.holder(n.first), nil
	}
	return fmt.Sprintf("%s @%d", s.short(n.path), n.czxid), nil
}

// Holds says whether c's hold of lease is the lock on key now: for
// zk-ephemeral, the node at its path is the one the lease's create made
// (its czxid is the lease's fence); for a queue (zk-recipe, zk-golib), the
// first node in line is one that c made (its GUID). Probe shows the
// holder as the timeline names it, which no Lease.Token equals, so the
// wrongful-release check asks this instead (harness.HoldProber).
func (s *zkStore) Holds(_ context.Context, _ int, key string, c *harness.Client, lease locklab.Lease) (bool, error) {
	n, err := s.lockNode(key)
	switch {
	case err != nil || n == nil:
		return false, err
	case n.first != "":
		return s.maker(n.first) == fmt.Sprintf("c%d", c.ID()), nil
	}
	return n.czxid == lease.Fence, nil
}

// lockNode is the node that holds the lock on key: zk-ephemeral's, at
// path with its czxid, or a queue's first in line (first, its name).
type lockNode struct {
	path  string
	czxid int64
	first string
}

// lockNode reads which node holds the lock on key, outside the schedule;
// nil when none does.
func (s *zkStore) lockNode(key string) (*lockNode, error) {
	for _, name := range strategyNames {
		p := zklock.Path(name, key)
		if name == zklock.EphemeralName {
			_, st, err := s.admin.Get(p)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, err
			}
			return &lockNode{path: p, czxid: st.Czxid}, nil
		}
		children, _, err := s.admin.Children(p)
		if errors.Is(err, zk.ErrNoNode) || len(children) == 0 {
			continue
		}
		if err != nil {
			return nil, err
		}
		sort.Slice(children, func(i, j int) bool { return sequence(children[i]) < sequence(children[j]) })
		return &lockNode{path: p, first: children[0]}, nil
	}
	return nil, nil
}

// sequence is a sequential node's sequence number, its last ten digits.
func sequence(name string) string {
	if len(name) < 10 {
		return name
	}
	return name[len(name)-10:]
}

// Reconnect does nothing: a connection whose server died finds another
// by itself.
func (s *zkStore) Reconnect(int) {}

// Close empties the ensemble and closes the store's connection.
func (s *zkStore) Close(ctx context.Context) error {
	// The ensemble may be gone already (a signal closed it): then nothing
	// answers, and the store waits no longer than closeTimeout.
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	err := s.Empty(ctx)
	s.mu.Lock()
	key := s.lockKey
	s.mu.Unlock()
	if key != "" {
		// The guarded writes' resource (guarded.go), where there is one.
		err = errors.Join(err, deleteTree(s.admin, resourcePath(key)))
	}
	s.admin.Close()
	return err
}

// closeTimeout bounds a store's Close.
const closeTimeout = 10 * time.Second

// fixedHosts gives a connection the ensemble's first server that has not
// refused it since it last connected, in the ensemble's order whatever
// order zk.Connect hands it (it shuffles them): every client of a run is
// served by the same server, whichever leads, and comes back to it after
// its session expired, so that a read's answer does not depend on which
// server a client happened to reach (a follower answers reads from what it
// has applied). Only when every server refused does go-zookeeper wait (a
// second) before the next round. Each session its connections are given
// is noted as the harness's (sessions).
type fixedHosts struct {
	mu       sync.Mutex
	servers  []string
	refused  map[string]bool
	sessions *sessionSet
}

// newHosts gives the connections of the store's to node n their servers.
func newHosts(n *Node) *fixedHosts {
	return &fixedHosts{servers: n.Ensemble.Addrs(), refused: map[string]bool{}, sessions: &n.sessions}
}

func (h *fixedHosts) Init([]string) error { return nil }

func (h *fixedHosts) Len() int { return len(h.servers) }

func (h *fixedHosts) Next() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.servers {
		if !h.refused[s] {
			return s, false
		}
	}
	clear(h.refused)
	return h.servers[0], true
}

func (h *fixedHosts) Connected() {
	h.mu.Lock()
	clear(h.refused)
	h.mu.Unlock()
}

// dial dials addr, and notes a server that refused.
func (h *fixedHosts) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	// go-zookeeper gives a dial 1s, after which it moves to the next
	// server: a loaded machine must not move a client.
	nc, err := net.DialTimeout(network, addr, max(timeout, 10*time.Second))
	if err != nil {
		h.mu.Lock()
		h.refused[addr] = true
		h.mu.Unlock()
		return nil, err
	}
	return &sessionConn{Conn: nc, sessions: h.sessions}, nil
}

// nopLogger silences go-zookeeper's log of its connections' comings and
// goings.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
