// The etcd store's node: a cluster, whose faults strike the member that
// leads.

package etcd

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
)

// Name is the store of the strategies of family "etcd".
const Name = "etcd"

// Node is an etcd cluster that runs of the etcd family's strategies
// lock on: one node of the harness, however many members. Its faults
// strike the cluster's leader (fault.AtLeader): Kill kills it (the others
// elect a new one), Restart restarts it on its data directory (the raft
// log: a member comes back with every committed key, whatever keepData
// says), Failover kills it for the rest of the run and waits for the new
// leader (the failover of a Raft cluster, where only a member with every
// acknowledged write can win the election; the next run's Recover starts
// it again on its data directory), Pause stops it (SIGSTOP) until Resume.
// Its fault.MemberLoss strikes members one by one (fault.MemberWipe): Lag
// kills a follower, Wipe starts another member on an emptied data
// directory while the leader and the lagging member are down (waiting
// for its log to say it started its raft node before it starts the
// lagging one: a member that a peer answers refuses to start emptied),
// then the other two; Recover then starts the whole cluster afresh.
// NewNode makes one.
type Node struct {
	NodeName string
	Cluster  *etcdproc.Cluster
	*fault.AtLeader[*etcdproc.Member]
	*fault.MemberWipe[*etcdproc.Member]
	// resets counts the times Recover started the cluster afresh.
	resets atomic.Int64
	// history is the compaction of the cluster's history, which the
	// stores that run on the node share (compact.go).
	history compactor
}

// NewNode returns the node named name of cluster c.
func NewNode(name string, c *etcdproc.Cluster) *Node {
	return &Node{NodeName: name, Cluster: c, AtLeader: fault.NewAtLeader(c),
		MemberWipe: &fault.MemberWipe[*etcdproc.Member]{Quorum: c, Members: c.Members,
			StartEmpty: func(ctx context.Context, m *etcdproc.Member) (<-chan error, error) { return m.StartEmptyAlone(ctx) },
			Reset:      c.Reset, RejoinWait: rejoinWait}}
}

// rejoinWait bounds the wait for the leader that a member's loss killed
// to serve again (fault.MemberWipe.RejoinWait).
const rejoinWait = 5 * time.Second

// Recover makes the cluster whole for the next run: afresh after a
// member lost its data (fault.MemberWipe), with the member a failover
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
// on the docker backend a member's data directory lives in its container,
// which etcdproc does not empty (Member.RestartEmpty is the process
// backend's).
func (n *Node) Refuses(f fault.Fault) string {
	if f == fault.MemberLoss && n.Cluster.Backend() == etcdproc.BackendDocker {
		return "a member's loss of its data directory runs on the process backend only: on docker the directory lives in the member's container, which is not emptied"
	}
	return ""
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Addr returns the first member's client URL.
func (n *Node) Addr() string { return n.Cluster.Endpoints()[0] }

// Store returns Name.
func (n *Node) Store() string { return Name }

// Close stops the cluster and removes its members' directories.
func (n *Node) Close() error { return n.Cluster.Close() }
