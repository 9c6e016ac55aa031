// The ZooKeeper store's node: an ensemble, whose faults strike the server
// that leads.

package zookeeper

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
)

// Name is the store of the strategies of family "zookeeper".
const Name = "zookeeper"

// Node is a ZooKeeper ensemble that runs of the zookeeper family's
// strategies lock on: one node of the harness, however many servers. Its
// faults strike the ensemble's leader (fault.AtLeader): Kill kills it
// (the others elect a new one, which has every committed node), Restart
// restarts it on its data directory (its transaction log and snapshots),
// Failover kills it for the rest of the run and waits for the new leader
// (Zab elects only a server with every committed transaction; the next
// run's Recover starts it again on its data directory), Pause stops it
// (SIGSTOP) until Resume. Its fault.MemberLoss strikes servers one by one
// (fault.MemberWipe): Lag kills a follower, Wipe starts another server on
// an emptied data directory (no snapshot, log or epochs; its myid kept)
// beside the lagging one while the leader is down, then the leader;
// Recover then starts the whole ensemble afresh. NewNode makes one.
type Node struct {
	NodeName string
	Ensemble *zkproc.Ensemble
	*fault.AtLeader[*zkproc.Server]
	*fault.MemberWipe[*zkproc.Server]
	// resets counts the times Recover started the ensemble afresh: a
	// store's connection that saw the old one's transactions is refused
	// by the new one (its zxids are lower) and is dialled again.
	resets atomic.Int64

	// sessions are the ids of the sessions the store's connections to
	// the ensemble were given: the harness's own, which the audit does
	// not count (audit.go).
	sessions sessionSet
}

// NewNode returns the node named name of ensemble e.
func NewNode(name string, e *zkproc.Ensemble) *Node {
	return &Node{NodeName: name, Ensemble: e, AtLeader: fault.NewAtLeader(e),
		MemberWipe: &fault.MemberWipe[*zkproc.Server]{Quorum: e, Members: e.Servers,
			StartEmpty: func(ctx context.Context, s *zkproc.Server) (<-chan error, error) { return s.StartEmpty(ctx) },
			Reset:      e.Reset, RejoinWait: rejoinWait}}
}

// rejoinWait bounds the wait for the leader that a member's loss killed
// to serve again (fault.MemberWipe.RejoinWait).
const rejoinWait = 30 * time.Second

// Recover makes the ensemble whole for the next run: afresh after a
// server lost its data (fault.MemberWipe), with the server a failover
// killed started again (fault.AtLeader).
func (n *Node) Recover(ctx context.Context) error {
	reset, err := n.MemberWipe.Recover(ctx)
	if err != nil {
		return err
	}
	if reset {
		n.resets.Add(1)
	}
	return n.AtLeader.Recover(ctx)
}

// Refuses says why the node cannot carry out fault f ("" where it can):
// on the docker backend a server's data directory lives in its container,
// which zkproc does not empty (Server.RestartEmpty is the process
// backend's); a hosted ensemble's server shares its JVM with its peers,
// and cannot be paused alone.
func (n *Node) Refuses(f fault.Fault) string {
	if f == fault.Pause && n.Ensemble.Hosted() {
		return "a server of this ensemble shares its JVM with its peers (zkproc.Options.Hosted) and cannot be paused alone"
	}
	if f == fault.MemberLoss && n.Ensemble.Backend() == zkproc.BackendDocker {
		return "a server's loss of its data directory runs on the process backend only: on docker the directory lives in the server's container, which is not emptied"
	}
	return ""
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Addr returns the first server's client address.
func (n *Node) Addr() string { return n.Ensemble.Addrs()[0] }

// Store returns Name.
func (n *Node) Store() string { return Name }

// Close stops the ensemble and removes its servers' directories.
func (n *Node) Close() error { return n.Ensemble.Close() }
