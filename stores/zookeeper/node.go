// The ZooKeeper store's node: an ensemble, whose faults strike the server
// that leads.

package zookeeper

import (
	"context"
	"sync"

	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
)

// Name is the store of the strategies of family "zookeeper".
const Name = "zookeeper"

// Node is a ZooKeeper ensemble that runs of the zookeeper family's
// strategies lock on: one node of the harness, however many servers. Its
// faults strike the ensemble's leader (node.LeaderFaults): Kill kills it
// (the others elect a new one, which has every committed node), Restart
// restarts it on its data directory (its transaction log and snapshots),
// Failover kills it for the rest of the run and waits for the new leader,
// Pause stops it (SIGSTOP) until Resume.
type Node struct {
	NodeName string
	Ensemble *zkproc.Ensemble

	once   sync.Once
	faults *node.LeaderFaults[*zkproc.Server]
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Addr returns the first server's client address.
func (n *Node) Addr() string { return n.Ensemble.Addrs()[0] }

// Store returns Name.
func (n *Node) Store() string { return Name }

// Close stops the ensemble and removes its servers' directories.
func (n *Node) Close() error { return n.Ensemble.Close() }

func (n *Node) leader() *node.LeaderFaults[*zkproc.Server] {
	n.once.Do(func() { n.faults = &node.LeaderFaults[*zkproc.Server]{Cluster: n.Ensemble} })
	return n.faults
}

// Kill kills the leader (SIGKILL).
func (n *Node) Kill(ctx context.Context) error { return n.leader().Kill(ctx) }

// Restart starts the server the last Kill struck again, or kills the
// leader and starts it again, on its data directory.
func (n *Node) Restart(ctx context.Context, keepData bool) error {
	return n.leader().Restart(ctx, keepData)
}

// Failover kills the leader (SIGKILL) and waits until the others have
// elected a new one: Zab elects only a server with every committed
// transaction. The killed server stays down for the rest of the run; the
// next run's store starts it again on its data directory (Recover).
func (n *Node) Failover(ctx context.Context) error { return n.leader().Failover(ctx) }

// Recover starts again the server a Failover killed, and waits for the
// ensemble to be healthy.
func (n *Node) Recover(ctx context.Context) error { return n.leader().Recover(ctx) }

// Pause stops the leader (SIGSTOP).
func (n *Node) Pause(ctx context.Context) error { return n.leader().Pause(ctx) }

// Resume continues the server Pause stopped.
func (n *Node) Resume(ctx context.Context) error { return n.leader().Resume(ctx) }
