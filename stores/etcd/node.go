// The etcd store's node: a cluster, whose faults strike the member that
// leads.

package etcd

import (
	"context"
	"fmt"
	"sync"

	"github.com/locklab/locklab/stores/etcd/etcdproc"
)

// Name is the store of the strategies of family "etcd".
const Name = "etcd"

// Node is an etcd cluster that runs of the etcd family's strategies
// lock on: one node of the harness, however many members. Its faults
// strike the cluster's leader: Kill kills it (the others elect a new one),
// Restart restarts it on its data directory (the raft log: a member comes
// back with every committed key, whatever keepData says), Failover kills it
// for the rest of the run and waits for the new leader, Pause stops it
// (SIGSTOP) until Resume.
type Node struct {
	NodeName string
	Cluster  *etcdproc.Cluster

	mu     sync.Mutex
	struck *etcdproc.Member // the member the last fault struck
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Addr returns the first member's client URL.
func (n *Node) Addr() string { return n.Cluster.Endpoints()[0] }

// Store returns Name.
func (n *Node) Store() string { return Name }

// Close stops the cluster and removes its members' directories.
func (n *Node) Close() error { return n.Cluster.Close() }

func (n *Node) leader(ctx context.Context) (*etcdproc.Member, error) {
	m, err := n.Cluster.Leader(ctx)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.struck = m
	n.mu.Unlock()
	return m, nil
}

func (n *Node) last() *etcdproc.Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.struck
}

// Kill kills the leader (SIGKILL).
func (n *Node) Kill(ctx context.Context) error {
	m, err := n.leader(ctx)
	if err != nil {
		return err
	}
	m.Kill()
	return nil
}

// Restart starts the member the last Kill struck again, or kills the
// leader and starts it again, on its data directory.
func (n *Node) Restart(ctx context.Context, _ bool) error {
	m := n.last()
	if m == nil || m.Running() {
		var err error
		if m, err = n.leader(ctx); err != nil {
			return err
		}
	}
	if err := m.Restart(ctx); err != nil {
		return err
	}
	return n.Cluster.WaitHealthy(ctx)
}

// Failover kills the leader (SIGKILL) and waits until the others have
// elected a new one: the failover of a Raft cluster, where only a member
// with every acknowledged write can win the election. The killed member
// stays down for the rest of the run; the next run's empty starts it
// again on its data directory (Recover).
func (n *Node) Failover(ctx context.Context) error {
	m, err := n.leader(ctx)
	if err != nil {
		return err
	}
	m.Kill()
	if _, err := n.Cluster.Leader(ctx); err != nil {
		return fmt.Errorf("after killing the leader %s: %w", m.Name, err)
	}
	return nil
}

// Recover starts again, on its data directory, the member a Failover
// killed, and waits for the cluster to be healthy: the next run starts on
// a whole cluster, as the first did.
func (n *Node) Recover(ctx context.Context) error {
	m := n.last()
	if m == nil || m.Running() {
		return nil
	}
	if err := m.Restart(ctx); err != nil {
		return err
	}
	return n.Cluster.WaitHealthy(ctx)
}

// Pause stops the leader (SIGSTOP).
func (n *Node) Pause(ctx context.Context) error {
	m, err := n.leader(ctx)
	if err != nil {
		return err
	}
	return m.Stop()
}

// Resume continues the member Pause stopped.
func (n *Node) Resume(context.Context) error {
	if m := n.last(); m != nil {
		return m.Cont()
	}
	return nil
}
