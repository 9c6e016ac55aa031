// The etcd store's node: a cluster, whose faults strike the member that
// leads.

package etcd

import (
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
// NewNode makes one.
type Node struct {
	NodeName string
	Cluster  *etcdproc.Cluster
	*fault.AtLeader[*etcdproc.Member]
	// history is the compaction of the cluster's history, which the
	// stores that run on the node share (compact.go).
	history compactor
}

// NewNode returns the node named name of cluster c.
func NewNode(name string, c *etcdproc.Cluster) *Node {
	return &Node{NodeName: name, Cluster: c, AtLeader: fault.NewAtLeader(c)}
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Addr returns the first member's client URL.
func (n *Node) Addr() string { return n.Cluster.Endpoints()[0] }

// Store returns Name.
func (n *Node) Store() string { return Name }

// Close stops the cluster and removes its members' directories.
func (n *Node) Close() error { return n.Cluster.Close() }
