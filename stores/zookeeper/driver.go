// Package zookeeper is the ZooKeeper store of the harness: the ensembles
// the zookeeper family's locks (strategies/zklock) run on, in the matrix,
// and how each request on a client's connection becomes a step. Importing
// it registers it with the harness (harness.RegisterStore).
//
//	driver.go    the store's Driver: its servers, bounds, n/a cells, tellings
//	node.go      the node: an ensemble, whose faults strike its leader, or its servers one by one (a server's loss)
//	store.go     a slot's store: each client's connection, probing
//	empty.go     emptying between runs: only the paths a run used
//	session.go   sessions: awaited on connecting, expired on the servers on the run's clock
//	socket.go    a client's socket: each request a step, each answer its reply
//	wire.go      ZooKeeper's wire format, as far as the store reads it
//	wait.go      zk-golib's Lock, which waits on a watch between its steps
//	label.go     how a request and its answer show in a timeline
//	tellings.go  the scenarios as told for ZooKeeper
//	audit.go     the sessions the servers hold that the harness did not open
package zookeeper

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/strategies/zklock" // registers the zookeeper family
)

// RestartSchedules bounds a cell whose scenario restarts or kills the
// leader: each fault waits for an election. It is a safety net above the
// cells' own counts: every cell of the documented matrix is explored to
// the end of its bound.
const RestartSchedules = 2000

// serverConfig lets a client's session outlive any run: the store expires
// sessions on the run's clock (store.go).
var serverConfig = []string{"maxSessionTimeout=60000"}

func init() {
	harness.RegisterStore(&harness.Driver{
		Stress:      stressDriver,
		Name:        Name,
		Title:       "ZooKeeper",
		Rank:        3,
		Installed:   zkproc.Installed,
		Start:       start,
		StartShared: startShared,
		StartFault:  startFault,
		Describe:    describe,
		Open: func(nodes []harness.Node, _ harness.OpenOptions) (harness.Store, error) {
			return newStore(nodes[0].(*Node))
		},
		MultiNode: "a story of Redlock's independent masters: a ZooKeeper lock lives on one ensemble, whose " +
			"servers agree on every write before it is acknowledged",
		NA: func(sc *harness.Scenario) string {
			if sc.EndsSessions() {
				return "the session is the lock's ZooKeeper session, which the server ends only when its holder falls silent " +
					"past its timeout: pause-past-ttl"
			}
			return ""
		},
		Tellings:    tellings,
		Known:       known,
		PlayLevels:  playLevels,
		PlayServers: func(int, bool) string { return "a three-server ZooKeeper ensemble" },
		Lockers:     map[string]harness.Factory{zklock.GolibName: golibLock},
		Guards:      map[string]string{zklock.EphemeralName: guardEphemeral, zklock.RecipeName: guardRecipe},
		Unguarded:   map[string]string{zklock.GolibName: unguardedGolib},
		Limits:      []harness.Limit{{Schedules: RestartSchedules, Where: "on ZooKeeper"}},
		Bench:       bench,
		Audit:       startAudit,
		Abbreviations: func(string) string {
			return "P: the lock's path; P/_c_c1-lock-0000000000: the node client c1 made under it (its GUID " +
				"shown as c1), with the sequence number the server gave it. -e, -s: an ephemeral, a sequential " +
				"node. @N: a node's czxid, the id of the transaction that created it, which is the lock's fence. " +
				"The server's column shows which node holds the lock after the step: c2 #1 for the node c2 made, " +
				"sequence number 1, first in the queue; P @N for zk-ephemeral's node (-: nobody). R: the node a " +
				"guarded write sets (multi check P v0, set R: the set runs only if P is there at version 0)."
		},
	})
}

// start starts count three-server ensembles on backend, side by side.
func start(ctx context.Context, backend string, count int) ([]harness.StoreNode, error) {
	return harness.StartEach(ctx, count, func(ctx context.Context) (harness.StoreNode, error) {
		return startEnsemble(ctx, zkproc.Options{Backend: backend, Config: serverConfig})
	})
}

// startEnsemble starts one ensemble with o, as a node.
func startEnsemble(ctx context.Context, o zkproc.Options) (harness.StoreNode, error) {
	e, err := zkproc.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	return NewNode("n1", e), nil
}

// startShared starts the server, standalone, that the cells that fault no
// server share: every client of a run is served by one server of an
// ensemble (fixedHosts), which answers and notifies in the order the
// ensemble commits, so a server alone answers each request as an ensemble
// does, for a third of the work (docs/reduction.md, "One server for the
// cells that fault none").
func startShared(ctx context.Context, backend string) (harness.StoreNode, error) {
	return startEnsemble(ctx, zkproc.Options{Backend: backend, Config: serverConfig, Servers: 1})
}

// startFault starts the ensemble that a cell that kills, restarts or
// fails over a server runs on: on the process backend, its servers are
// peers of one JVM, which stays up while they are killed and restarted
// (zkproc.Options.Hosted), for a fifth of the CPU of a JVM started anew
// each time (docs/reduction.md, "Fault servers that stay up").
func startFault(ctx context.Context, backend string) (harness.StoreNode, error) {
	return startEnsemble(ctx, zkproc.Options{Backend: backend, Config: serverConfig, Hosted: backend != zkproc.BackendDocker})
}

// describe names the first ensemble, and the others' servers.
func describe(first harness.StoreNode, more []harness.StoreNode) string {
	line := first.(*Node).Ensemble.Describe()
	for _, n := range more {
		line += fmt.Sprintf(", and %s for the cells that restart or kill its leader", strings.Join(n.(*Node).Ensemble.Addrs(), ","))
	}
	return line
}

// bench is ZooKeeper's part of locklab bench --stores: its three locks,
// each locker on a session of its own, as separate processes would be: a
// contender that shared a session with the others would share its
// ephemeral nodes and its watches. The contenders wait in the locks' own
// Lock, on a watch, and their requests are counted: zk-ephemeral's herd
// shows in its requests per lock cycle, which grow with the waiters.
var bench = &harness.Bench{
	Row:        3,
	Strategies: []string{"zk-recipe", "zk-ephemeral", "zk-golib"},
	Open: func(_ context.Context, n harness.StoreNode, _ int) (locklab.Config, string, func(), error) {
		return locklab.Config{}, n.(*Node).Ensemble.Describe(), func() {}, nil
	},
	Contender: func(ctx context.Context, n harness.StoreNode, requests *atomic.Int64) (locklab.Config, func(), error) {
		conn, err := benchConn(ctx, n.(*Node).Ensemble.Addrs(), requests)
		if err != nil {
			return locklab.Config{}, nil, err
		}
		return locklab.Config{Store: conn}, conn.Close, nil
	},
	CountsRequests: true,
	Lock:           true,
}

// benchConn connects to the servers addrs and waits for the session,
// while ctx lasts: a locker's first cycle does not wait for the handshake.
// When requests is not nil, each request the connection sends adds one to
// it (countingConn).
func benchConn(ctx context.Context, addrs []string, requests *atomic.Int64) (*zk.Conn, error) {
	dial := zk.Dialer(net.DialTimeout)
	if requests != nil {
		dial = func(network, address string, timeout time.Duration) (net.Conn, error) {
			c, err := net.DialTimeout(network, address, timeout)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: c, requests: requests}, nil
		}
	}
	conn, events, err := zk.Connect(addrs, sessionTimeout, zk.WithDialer(dial), zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	if err := awaitSession(ctx, events); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// countingConn is a client's connection that counts the requests the
// client writes on it. Each frame is a 4-byte length, then a packet: the
// connection's first is the handshake, each other starts with the
// request's xid and opcode. Heartbeats (xid -2, opcode 11) and the close
// of the session are not counted: they are no part of a lock's cycle.
type countingConn struct {
	net.Conn
	requests *atomic.Int64
	// shook: the handshake went out; written: the bytes written that
	// make no whole frame yet.
	shook   bool
	written []byte
}

// Write sends b and counts the requests of the frames it completes.
func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written = append(c.written, b[:n]...)
	for len(c.written) >= 4 {
		size := int(binary.BigEndian.Uint32(c.written))
		if len(c.written) < 4+size {
			break
		}
		r := &reader{b: c.written[4 : 4+size]}
		r.int32() // xid
		op := r.int32()
		switch {
		case !c.shook:
			c.shook = true
		case r.err == nil && op != opPing && op != opClose:
			c.requests.Add(1)
		}
		c.written = append(c.written[:0], c.written[4+size:]...)
	}
	return n, err
}
