// Nodes: the servers a run uses (anything with a name and an address; the
// faults a node supports are node's interfaces), and the slot that one run
// executes in: the nodes, and the store its lock lives on there.

package harness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
)

// Node is a server the harness runs schedules on: a Redis server, or a
// store's node (StoreNode). It names the registered store it serves,
// whose Store a slot on it opens; that store talks to it through its own
// connections to Addr (Redis's: one database per parallel worker), so a
// Node needs no more than a name, an address and its store. Redis's nodes
// (stores/redis/redisnode's) satisfy it, and so does AddrNode. Schedules
// and scenarios that fault a node need it to implement harness/fault's
// interfaces
// (fault.Pauser, fault.Killer, fault.Restarter, fault.Partitioner,
// fault.FailingOver).
type Node interface {
	Name() string
	Addr() string
	// Store names the registered store the node serves (a Driver's Name).
	Store() string
}

// AddrNode is a server given by name, address and the name of the
// registered store it serves.
type AddrNode struct {
	NodeName, NodeAddr, NodeStore string
}

// Store names the node's store.
func (n AddrNode) Store() string { return n.NodeStore }

// replicaLink is a node whose replica lags until asked to catch up
// (redisnode.Replicated): a strategy that waits for a replica (WAIT) needs one.
type replicaLink interface {
	CatchUp(ctx context.Context) error
	Lag(ctx context.Context) error
}

// Name returns the node's name.
func (n AddrNode) Name() string { return n.NodeName }

// Addr returns the node's "host:port".
func (n AddrNode) Addr() string { return n.NodeAddr }

// slot is where one run executes: a set of nodes, and the store that
// keeps the lock there, which the nodes' store's Driver opened (Redis's:
// one database on each Redis node; parallel workers use separate
// databases of the same servers, or separate namespaces of a server the
// harness does not own).
type slot struct {
	nodes []Node
	// appendFsync is the fsync policy of the append-only file the slot's
	// nodes write for as long as the slot lasts ("": none, or each run
	// switches its own on and off).
	appendFsync string
	store       Store
	// keySuffix, on a store other than Redis, keeps the runs of the
	// exploration's other workers apart from worker 0's on one server:
	// they lock the key with it appended (storeKeySuffix), where Redis's
	// workers each have a database.
	keySuffix string
}

// storeKeySuffix is what worker w of an exploration on a store other than
// Redis appends to the key its runs lock: "" for worker 0 (the key the
// scenario names, which a replay locks), "~w2" for worker 2. A store
// keeps one key's runs apart from another's (each run empties its key and
// ends its own sessions), so the workers' runs never meet; their
// histories show the key without it.
func storeKeySuffix(w int) string {
	if w == 0 {
		return ""
	}
	return "~w" + strconv.Itoa(w)
}

// newSlot makes the slot of database db on nodes for the runs of strategy
// (OpenOptions.Strategy). steps are the steps its
// runs may take beyond the clients' own (a schedule, a fault alphabet):
// when none of them partitions a node, the slot dials the nodes' direct
// addresses. The other faults reach a client the same way on both (a
// killed, paused or failed-over server is the same server), and a run
// refuses the commands to a node it took down before they are sent.
func newSlot(nodes []Node, db int, strategy string, steps ...[]Step) (*slot, error) {
	direct := true
	for _, sts := range steps {
		if slices.ContainsFunc(sts, func(st Step) bool { return st.Kind == StepPartition || st.Kind == StepHeal }) {
			direct = false
		}
	}
	d, err := LookupStore(nodeStore(nodes))
	if err != nil {
		return nil, err
	}
	st, err := d.Open(nodes, OpenOptions{Worker: db, Direct: direct, Strategy: strategy})
	if err != nil {
		return nil, err
	}
	s := &slot{nodes: nodes, store: st}
	if !d.Workers {
		s.keySuffix = storeKeySuffix(db)
	}
	return s, nil
}

// close closes the slot's store, within closeEmptyTimeout, once the
// members a failover killed in its last run have started again, within
// recoverTimeout: a member takes seconds to start and rejoin on a loaded
// machine (a ZooKeeper server is a JVM), more than emptying a key does,
// and the cell that runs on the cluster next wants it whole. On a cluster
// closed already (Ctrl-C) no member starts, and that is said at once.
func (s *slot) close() error {
	for _, n := range s.nodes {
		if r, ok := n.(interface{ Recover(context.Context) error }); ok {
			ctx, cancel := context.WithTimeout(context.Background(), recoverTimeout)
			err := r.Recover(ctx)
			cancel()
			if err != nil {
				return fmt.Errorf("restarting the member a failover killed on %s: %w", n.Name(), err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeEmptyTimeout)
	defer cancel()
	return s.store.Close(ctx)
}

// appendOnly switches the append-only file of every node of the slot that
// can write one on (with the fsync policy fsync) or off.
func (s *slot) appendOnly(ctx context.Context, on bool, fsync string) error {
	for _, n := range s.nodes {
		a, ok := n.(appendOnly)
		if !ok {
			continue
		}
		if err := a.SetAppendOnly(ctx, on, fsync); err != nil {
			return err
		}
	}
	return nil
}

// keepAppendOnly switches the append-only file of the slot's nodes on for
// every run in it, until the returned function switches it off: a run then
// leaves it on. Switching it on costs a rewrite of the file on every node
// (a fork that the server notices on its next cron tick, up to 100ms), so
// that an exploration pays it once, not on every schedule. A run's restart
// that keeps the data then replays the earlier runs' commands too, their
// FLUSHDB included: it finds the data the run left, as with a file of its
// own. It is for slots whose nodes no other run uses meanwhile: the cells
// that fault nodes have them to themselves.
func (s *slot) keepAppendOnly(ctx context.Context, fsync string) (func() error, error) {
	if err := s.appendOnly(ctx, true, fsync); err != nil {
		return nil, err
	}
	s.appendFsync = fsync
	return func() error {
		s.appendFsync = ""
		return s.appendOnly(context.WithoutCancel(ctx), false, fsync)
	}, nil
}
