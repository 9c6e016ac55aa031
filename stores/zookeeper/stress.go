// ZooKeeper in stress mode (harness/stress): a run of a zookeeper-family
// strategy (zk-recipe, zk-ephemeral, zk-golib) on a three-server ensemble
// (a Node), whose clients reach the servers through loopback proxies, and
// its node faults: the leader killed, paused or partitioned from the
// clients.
//
// Each client incarnation, and each worker process, has a connection, and
// so a session, of its own, whose timeout is the run's TTL: a lock lives
// as long as the session that created its node. A crashed client sends
// nothing more, heartbeats included, so its session expires a TTL later
// and its node with it, as a dead process's does. A goroutine client's
// pause stops its critical section, not its connection's heartbeats: its
// session, and its lock, live on. With --processes a pause is SIGSTOP,
// heartbeats included, and a pause past the TTL loses the lock to the
// session's expiry while the holder works on.

package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/internal/tooling/tcpproxy"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/strategies/zklock"
)

// StressFaults are the node faults of a stress run on a ZooKeeper
// ensemble, each striking the server that leads when it begins:
// fault.LeaderKill (SIGKILL, then started again on its data directory),
// fault.Pause (SIGSTOP, then SIGCONT) and fault.Partition (the clients'
// proxy to it cut, then healed; its peer traffic is not cut).
var StressFaults = []fault.Fault{fault.LeaderKill, fault.Pause, fault.Partition}

// StressLease is the granularity of a stress run's TTL, its clients'
// session timeout: two ticks of the ensemble's tickTime, the shortest
// session timeout its servers grant.
const StressLease = 2 * zkproc.DefaultTickTime

// adminTimeout is the session timeout of a stress run's own connection,
// which empties the ensemble and reads the lock's nodes: short enough
// that a request to a paused server fails within seconds.
const adminTimeout = 4 * time.Second

// stressDriver is the store's part of stress mode (its Driver's Stress).
var stressDriver = &stress.StoreDriver{
	Servers: "a three-server ZooKeeper ensemble",
	Faults:  StressFaults,
	Own: map[fault.Fault]string{
		fault.LeaderKill: "strikes a ZooKeeper ensemble's leader: it takes a ZooKeeper strategy",
	},
	Lease:  StressLease,
	Start:  startStress,
	Worker: stressWorker,
}

// stressRun is a stress run's side of an ensemble: a proxy in front of
// each server, in server order, which the clients dial and a partition
// cuts, and a connection of the run's own that reaches the servers
// directly.
type stressRun struct {
	e        *zkproc.Ensemble
	proxies  []*tcpproxy.Proxy
	addrs    []string // the proxies'
	admin    *zk.Conn
	ttl      time.Duration // the clients' session timeout
	strategy string
	stuck    time.Duration
}

// startStress puts a proxy in front of every server of the ensemble of
// n, a *Node.
func startStress(_ context.Context, n stress.StoreServers, o stress.Options) (_ stress.StoreRun, err error) {
	zn, ok := n.(*Node)
	if !ok {
		return nil, fmt.Errorf("stress on ZooKeeper: the servers are a %T, not a ZooKeeper Node", n)
	}
	z := &stressRun{e: zn.Ensemble, ttl: o.TTL, strategy: o.Strategy, stuck: o.Stuck}
	defer func() {
		if err != nil {
			z.Close()
		}
	}()
	for _, s := range z.e.Servers() {
		p, err := tcpproxy.New(s.Addr())
		if err != nil {
			return nil, err
		}
		z.proxies = append(z.proxies, p)
		z.addrs = append(z.addrs, p.Addr())
	}
	if z.admin, _, err = zk.Connect(z.e.Addrs(), adminTimeout, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false)); err != nil {
		return nil, err
	}
	return z, nil
}

// Empty deletes everything under the locks' root: the ensemble is the
// run's own.
func (z *stressRun) Empty(context.Context) error {
	if err := deleteTree(z.admin, zklock.DefaultRoot); err != nil {
		return fmt.Errorf("emptying %s on ZooKeeper: %w", zklock.DefaultRoot, err)
	}
	return nil
}

// Close closes the proxies and the run's connection.
func (z *stressRun) Close() error {
	for _, p := range z.proxies {
		p.Close()
	}
	if z.admin != nil {
		z.admin.Close()
	}
	return nil
}

// Connect gives cfg a connection of its own through the proxies, a
// session whose timeout is the run's TTL, whose every request may crash
// the client (c).
func (z *stressRun) Connect(_ context.Context, _ int, c stress.Crasher, cfg *locklab.Config) (func(), error) {
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		if c.Crashed() {
			return nil, stress.ErrCrashed
		}
		nc, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return &crashConn{Conn: nc, c: c}, nil
	}
	conn, _, err := zk.Connect(z.addrs, z.ttl, zk.WithDialer(dial), zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	cfg.Store = conn
	return conn.Close, nil
}

// crashConn is a stress client's socket to a server: once the client has
// crashed it sends nothing, heartbeats included, so that its session
// expires as a dead process's does; after each answer to one of the
// client's requests the client may crash.
type crashConn struct {
	net.Conn
	c stress.Crasher

	mu sync.Mutex
	// read is the part of the answers read that makes no whole frame yet.
	read []byte
}

// Write sends b unless the client has crashed.
func (s *crashConn) Write(b []byte) (int, error) {
	if s.c.Crashed() {
		s.Conn.Close()
		return 0, stress.ErrCrashed
	}
	return s.Conn.Write(b)
}

// Read reads the server's frames, and rolls the crasher once for each
// answer to a request: a frame whose xid is positive (the handshake's
// answer, heartbeats' and watches' events have none).
func (s *crashConn) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	if n > 0 {
		for range s.answers(b[:n]) {
			s.c.Roll()
		}
	}
	return n, err
}

// answers takes in bytes the server sent and counts the whole frames
// that answer requests.
func (s *crashConn) answers(b []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.read = append(s.read, b...)
	count := 0
	for len(s.read) >= 4 {
		n := int(binary.BigEndian.Uint32(s.read))
		if len(s.read) < 4+n {
			break
		}
		if n >= 4 && int32(binary.BigEndian.Uint32(s.read[4:])) > 0 {
			count++
		}
		s.read = s.read[4+n:]
	}
	return count
}

// WorkerArgs are the clients' session timeout, then the proxies'
// addresses, which a worker dials.
func (z *stressRun) WorkerArgs(int) []string { return append([]string{z.ttl.String()}, z.addrs...) }

// stressWorker gives a worker process's cfg a connection of its own, with
// the session timeout args[0], to the servers args[1:].
func stressWorker(_ context.Context, args []string, cfg *locklab.Config) (func(), error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("worker: ZooKeeper takes the session timeout, then the servers, as --store-arg; got %d", len(args))
	}
	ttl, err := time.ParseDuration(args[0])
	if err != nil {
		return nil, fmt.Errorf("worker: ZooKeeper's session timeout: %w", err)
	}
	conn, _, err := zk.Connect(args[1:], ttl, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	cfg.Store = conn
	return conn.Close, nil
}

// Stuck says what a lock nobody takes on ZooKeeper is: a node that holds
// it, created longer ago than the run's Stuck, whose session lives on
// (one that ended would have taken it along within a TTL), never frees
// itself (deadlock: a queued node its client forgot, samuel/go-zookeeper
// #229, or a create whose answer was lost, ZOOKEEPER-1262); otherwise the
// lock is starved.
func (z *stressRun) Stuck(ctx context.Context, key string) (string, bool) {
	type oldest struct {
		at    time.Time
		found bool
		err   error
	}
	ch := make(chan oldest, 1)
	go func() {
		at, found, err := oldestNode(z.admin, zklock.Path(z.strategy, key))
		ch <- oldest{at, found, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return "", false
		}
		if o.found && time.Since(o.at) >= z.stuck {
			return stress.KindDeadlock, true
		}
		return stress.KindStarvation, true
	case <-ctx.Done():
	case <-time.After(time.Second): // a request to a paused server
	}
	return "", false
}

// oldestNode returns the creation time of the oldest ephemeral node at p
// (zk-ephemeral's lock) or under it (the recipes' queue): the one that
// holds the lock. found is false when there is none.
func oldestNode(conn *zk.Conn, p string) (at time.Time, found bool, err error) {
	ok, st, err := conn.Exists(p)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	if st.EphemeralOwner != 0 {
		return time.UnixMilli(st.Ctime), true, nil
	}
	children, _, err := conn.Children(p)
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
		return time.Time{}, false, err
	}
	for _, ch := range children {
		ok, st, err := conn.Exists(p + "/" + ch)
		if err != nil {
			return time.Time{}, false, err
		}
		if ok && st.EphemeralOwner != 0 && (!found || time.UnixMilli(st.Ctime).Before(at)) {
			at, found = time.UnixMilli(st.Ctime), true
		}
	}
	return at, found, nil
}

// Fault strikes the server that leads now with s.Kind for s.For, then
// heals it: a kill is followed by a restart on the server's data
// directory, a pause by SIGCONT, a cut of its clients' proxy by healing
// it; then it waits until the ensemble is healthy. A fault in progress is
// always healed, even when ctx ends meanwhile.
func (z *stressRun) Fault(ctx context.Context, s *stress.Strike) error {
	return stress.StrikeLeader(ctx, s, z.e, "ZooKeeper", "ensemble", func(m *zkproc.Server) *tcpproxy.Proxy { return z.proxies[m.Index] })
}
