// The etcd store's node: a cluster, whose faults strike the member that
// leads.

package etcd

import (
	"context"
	"sync"

	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
)

// Name is the store of the strategies of family "etcd".
const Name = "etcd"

// Node is an etcd cluster that runs of the etcd family's strategies
// lock on: one node of the harness, however many members. Its faults
// strike the cluster's leader (node.LeaderFaults): Kill kills it (the
// others elect a new one), Restart restarts it on its data directory (the
// raft log: a member comes back with every committed key, whatever
// keepData says), Failover kills it for the rest of the run and waits for
// the new leader, Pause stops it (SIGSTOP) until Resume.
type Node struct {
	NodeName string
	Cluster  *etcdproc.Cluster

	once   sync.Once
	faults *node.LeaderFaults[*etcdproc.Member]
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Addr returns the first member's client URL.
func (n *Node) Addr() string { return n.Cluster.Endpoints()[0] }

// Store returns Name.
func (n *Node) Store() string { return Name }

// Close stops the cluster and removes its members' directories.
func (n *Node) Close() error { return n.Cluster.Close() }

func (n *Node) leader() *node.LeaderFaults[*etcdproc.Member] {
	n.once.Do(func() { n.faults = &node.LeaderFaults[*etcdproc.Member]{Cluster: n.Cluster} })
	return n.faults
}

// Kill kills the leader (SIGKILL).
func (n *Node) Kill(ctx context.Context) error { return n.leader().Kill(ctx) }

// Restart starts the member the last Kill struck again, or kills the
// leader and starts it again, on its data directory.
func (n *Node) Restart(ctx context.Context, keepData bool) error {
	return n.leader().Restart(ctx, keepData)
}

// Failover kills the leader (SIGKILL) and waits until the others have
// elected a new one: the failover of a Raft cluster, where only a member
// with every acknowledged write can win the election. The killed member
// stays down for the rest of the run; the next run's empty starts it
// again on its data directory (Recover).
func (n *Node) Failover(ctx context.Context) error { return n.leader().Failover(ctx) }

// Recover starts again, on its data directory, the member a Failover
// killed, and waits for the cluster to be healthy.
func (n *Node) Recover(ctx context.Context) error { return n.leader().Recover(ctx) }

// Pause stops the leader (SIGSTOP).
func (n *Node) Pause(ctx context.Context) error { return n.leader().Pause(ctx) }

// Resume continues the member Pause stopped.
func (n *Node) Resume(ctx context.Context) error { return n.leader().Resume(ctx) }
