// The ZooKeeper store's node: an ensemble, whose faults strike the server
// that leads.

package zookeeper

import (
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
// (SIGSTOP) until Resume. NewNode makes one.
type Node struct {
	NodeName string
	Ensemble *zkproc.Ensemble
	*fault.AtLeader[*zkproc.Server]

	// sessions are the ids of the sessions the store's connections to
	// the ensemble were given: the harness's own, which the audit does
	// not count (audit.go).
	sessions sessionSet
}

// NewNode returns the node named name of ensemble e.
func NewNode(name string, e *zkproc.Ensemble) *Node {
	return &Node{NodeName: name, Ensemble: e, AtLeader: fault.NewAtLeader(e)}
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Addr returns the first server's client address.
func (n *Node) Addr() string { return n.Ensemble.Addrs()[0] }

// Store returns Name.
func (n *Node) Store() string { return Name }

// Close stops the ensemble and removes its servers' directories.
func (n *Node) Close() error { return n.Ensemble.Close() }
