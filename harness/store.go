// The store contract: what the harness asks of a store a lock lives on.
//
// The run, its scheduler, its checkers, the explorer and the matrix know
// clients, steps and nodes. A store knows how a client's operations reach
// its servers (each one submitted to the scheduler as a step, through
// Client.Send), how to empty what earlier runs wrote, how time passes on
// it, and how to read the lock for the timeline. Every store is a folder
// of its own under stores/ (stores/redis, stores/etcd, stores/postgres,
// stores/zookeeper) that registers a Driver from its init, as
// database/sql's drivers do (RegisterStore): the harness imports none of
// them, and names none of them. Redis's is the Main store, whose servers
// are the nodes the harness is given. The tests have one
// more, harness/harnesstest/memstore, a lock server in the test's process
// that docs/development.md's checklist takes as its worked example.
//
// A store's folder holds:
//
//   - its servers: starting and stopping them on a backend (process or
//     docker), and their faults, as Nodes implementing harness/fault's
//     interfaces (fault.Killer, fault.Restarter, fault.Pauser,
//     fault.FailingOver);
//   - its Driver: its name and title, its Store for a slot's runs, which
//     scenarios have no meaning on it and why, its tellings of the
//     scenarios, its schedule bounds, the short names of its timelines;
//   - its labels: how a request or a statement shows as a step;
//   - its part of stress mode (Driver.Stress, harness/stress's
//     StoreDriver), which RegisterStore registers with stress mode: one
//     registration per store.
//
// A step's footprint (what it reads and writes, for a reduction that
// knows which steps commute) goes with its submission: SendTouching and a
// Touch (touch.go). A step sent without one touches everything. A time
// step's is the store's to say, as a TimeToucher; a store that says
// nothing has it touch everything.
//
// A store whose connections carry state across operations sends them on
// a Conn: the connection stays busy between an operation's answer and the
// next one, and a transaction open on it (Conn.SetTransaction: Redis's
// MULTI, whose server queues the commands until EXEC) has the explorer run
// its operations whole (stores/redis's MULTI).

package harness

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/internal/tooling/ttlclock"
)

// Driver is a store, as its folder registers it.
type Driver struct {
	// Name names the store and is the family of the strategies that lock
	// on it (strategies.Description.Family): "etcd", "postgres".
	Name string
	// Families are the other families whose strategies lock on the store.
	Families []string
	// Main says the store is the matrix's own: its servers are the nodes
	// the harness is given (MatrixOptions.Nodes, a run's nodes), where the
	// other stores' are started for their cells (MatrixOptions.Stores);
	// its cells take the matrix's bounds, and every scenario of the
	// catalog has a meaning there unless the scenario itself says not;
	// the strategies whose family names no store (a lock of one's own,
	// registered with a family of its own) lock on it; and messages and
	// levels that name a strategy's store leave it unnamed. One registered
	// store at most says so.
	Main bool
	// Workers says the store keeps an exploration's workers apart itself
	// (OpenOptions.Worker), where the harness otherwise has each worker
	// but the first lock the key with a suffix of its own.
	Workers bool
	// Title is how messages and pages name it: "PostgreSQL".
	Title string
	// Rank orders the stores wherever they are listed, the lowest first
	// (Redis's is 0).
	Rank int

	// Installed says how to install the store's servers where they cannot
	// be started here; nil where they can.
	Installed func() error
	// Start starts count servers of the store on backend ("process" or
	// "docker"), each one Node of the harness (a cluster is one node; its
	// faults strike the member they say). Each node's Close stops it.
	Start func(ctx context.Context, backend string, count int) ([]StoreNode, error)
	// StartShared, when set, starts the node that the matrix's cells that
	// fault no server share, smaller than Start's: one etcd member, one
	// ZooKeeper server standalone. A store sets it only where that node
	// answers every request of those cells as Start's does, so that every
	// cell explores the same schedules to the same verdict on either
	// (docs/reduction.md, "One server for the cells that fault none");
	// the cells that kill, restart or fail over a server run on Start's
	// (MatrixOptions.StartFaultServer), never on this one.
	StartShared func(ctx context.Context, backend string) (StoreNode, error)
	// StartFault, when set, starts the node that the matrix's cells that
	// kill, restart or fail over a server run on, in place of Start's
	// (MatrixOptions.StartFaultServer): a ZooKeeper ensemble whose
	// servers are peers of one JVM. A store sets it only where that node's
	// faults leave every cell exploring the same schedules to the same
	// verdict as on Start's (docs/reduction.md, "Fault servers that stay
	// up").
	StartFault func(ctx context.Context, backend string) (StoreNode, error)
	// FaultServers, when set, is how many servers of the store the
	// matrix's cells that fault a server run on at once by default, in
	// place of DefaultFaultServers (MatrixOptions.FaultServers): more for
	// a store whose servers cost little to keep and whose fault
	// schedules wait on elections more than they compute.
	FaultServers int
	// StartNodes starts servers of the Main store as nodes of their own,
	// as a run that takes several of them (Redlock's independent masters)
	// or fails one over needs them: o.N servers, the first with a replica
	// where o.Replica asks and the backend can start one. locklab play
	// starts its own levels' servers so (the other stores' levels take
	// Start's one node).
	StartNodes func(ctx context.Context, o NodesOptions) (*StartedNodes, error)
	// Describe is the line that names the servers Start started: the first
	// runs the store's cells, the others those that fault the server.
	Describe func(first StoreNode, more []StoreNode) string

	// Open makes the store of a slot on nodes (one of Start's, or the
	// nodes given, for the Main store).
	Open func(nodes []Node, o OpenOptions) (Store, error)

	// NA says why scenario sc has no meaning on the store, "" where it
	// has one. It is asked for the scenarios the harness does not rule
	// out itself: MultiNode's are n/a on every store but the Main one.
	// The Main store is asked too, for its own cells: a scenario of a
	// cluster of members (Scenario.Needs fault.MemberLoss) has no
	// meaning on its servers.
	NA func(sc *Scenario) string
	// MultiNode is why a scenario of Redlock's independent masters has no
	// meaning on the store.
	MultiNode string
	// Tellings tell the catalog's scenarios for the store, by scenario
	// name (Scenario.Stores).
	Tellings map[string]Telling
	// PlayLevels are the store's challenges in locklab play, after
	// Redis's and those of the stores of lower Rank.
	PlayLevels []PlayLevel
	// PlayServers says what a level of the store plays on, as play's page
	// shows it: nodes servers of the store (one cluster, for a store
	// whose node is a cluster), the first with a replica or standby when
	// replica.
	PlayServers func(nodes int, replica bool) string
	// Columns order the store's strategies in a matrix, after the
	// stores' of lower Rank; those not listed follow every store's,
	// sorted.
	Columns []string
	// Known are the schedules told or found for the store's strategies,
	// by scenario name and then strategy name: a scenario resolved for
	// one of them (Scenario.On) has them among its Known.
	Known map[string]map[string][]string
	// Limits bound the schedules of the cells whose scenario faults the
	// server (Scenario.Needs) below StoreRestartSchedules, where each
	// schedule waits for an election or a promotion.
	Limits []Limit
	// Renewals names, by strategy, the renewal the harness runs although
	// the strategy does not renew by default, because the lock it stands
	// for does (RunSetting).
	Renewals map[string]string
	// Lockers build, by strategy, the lock a column runs where the
	// registered factory does not give the lock as its users get it
	// (zk-golib's Acquire gives up after a patience that zk.Lock's users
	// do not have: its column waits as zk.Lock does).
	Lockers map[string]Factory
	// Queues names the strategies whose waiter waits in the lock's queue
	// on the server, on a lease or a session of its own that can run out
	// while it waits (etcd-mutex's key under the lock's prefix): the
	// scenarios of such a waiter (waiter-lease-expires) apply to them,
	// and to no other.
	Queues []string
	// Guards names, by strategy, what the strategy's lock hands its user
	// that the store's guarded write checks (Guarded): "the lock key and
	// its create revision (Lease.Token, Lease.Fence)". The Scenario.Guarded
	// scenarios apply to these strategies, and to no other.
	Guards map[string]string
	// Unguarded says, by strategy of the store, why its lock hands the
	// user nothing a guarded write could check; a strategy in neither map
	// gets unguardedNA.
	Unguarded map[string]string
	// Terminates says the store's Store ends a client's sessions
	// (Terminator) and its locks can live in one: the scenarios whose
	// server ends the holder's session (Scenario.EndsSessions) apply to
	// its strategies. Another store says why they do not in NA.
	Terminates bool
	// Bench is the store's part of `locklab bench --stores`.
	Bench *Bench
	// Stress is the store's part of stress mode (`locklab stress`), nil
	// where it has none. RegisterStore registers it with harness/stress,
	// under the Driver's Name and Title where it gives none of its own,
	// with the Driver's Families where it gives none and its Main: a
	// store's folder registers the one Driver.
	Stress *stress.StoreDriver
	// Abbreviations explains the short names of the store's timelines;
	// common is what every store's timeline shares.
	Abbreviations func(common string) string
	// Audit, where the store's servers count their own clients, starts
	// watching the servers behind nodes (the harness's own, no one
	// else's) for clients that the harness did not open: a lock that
	// talks to them through a client of its own beside the one it was
	// given sends requests that no run schedules. Check, once the runs
	// are over and their clients closed, returns an error naming every
	// such client the servers saw (StartAudit).
	Audit func(ctx context.Context, nodes []Node) (check func(context.Context) error, err error)
}

// StartAudit starts the audit of the store's servers behind nodes (the
// Driver's Audit): check returns an error naming each client of the
// servers' that the harness did not open, once the runs on them are over.
// A store with no Audit, or no nodes, gives a check that finds nothing.
func StartAudit(ctx context.Context, store string, nodes []Node) (check func(context.Context) error, err error) {
	d := driver(store)
	if d == nil || d.Audit == nil || len(nodes) == 0 {
		return func(context.Context) error { return nil }, nil
	}
	return d.Audit(ctx, nodes)
}

// NodesOptions are the servers Driver.StartNodes starts.
type NodesOptions struct {
	// Backend is what runs them (internal/tooling/backends): "docker",
	// "process", servers given to the store that it does not start
	// ("addrs"), or "" for the one the store picks.
	Backend string
	// Image is the container image of the docker backend, "" for the
	// store's own.
	Image string
	// N is how many, at least 1.
	N int
	// Replica gives the first an asynchronous replica, which a failover
	// promotes, where the backend can start one.
	Replica bool
	// Label names them where they run (containers' names): a test's name.
	Label string
}

// StartedNodes are the servers Driver.StartNodes started.
type StartedNodes struct {
	// Nodes are the servers, n1 first.
	Nodes []Node
	// Backend is the backend they run on: NodesOptions.Backend, or the one
	// the store picked.
	Backend string
	// Close stops them all and removes what they left.
	Close func() error
}

// OpenOptions are what a slot's Open is told beside its nodes.
type OpenOptions struct {
	// Worker is the exploration's worker the slot runs for (0 for a run
	// alone): a store whose Driver says Workers keeps each one's runs
	// apart from the others'.
	Worker int
	// Direct says no step of the slot's runs partitions a node: the store
	// may reach its servers past what a partition cuts.
	Direct bool
	// Strategy is the strategy the slot's runs lock with ("" when not
	// known): a store whose column is a setting of its servers, not of
	// its lock's code, sets them up for it.
	Strategy string
}

// Bench is how `locklab bench --stores` measures a store's locks.
type Bench struct {
	// Row orders the stores' rows in the table (Redis's come first).
	Row int
	// Strategies are the rows: the strategies measured, one each.
	Strategies []string
	// Open returns the Config the rows' lockers share on node n, for
	// contenders clients at once, and the line naming the servers; close
	// releases what Open opened. A *BenchLimit error says contenders is
	// more than the servers take.
	Open func(ctx context.Context, n StoreNode, contenders int) (cfg locklab.Config, server string, close func(), err error)
	// Contender, when set, opens the Config of one locker of a row on
	// node n, a client of its own, in place of Open's: each contender of
	// a contended run gets one, and so does the row's uncontended locker;
	// close releases it once that run is over. A store whose clients must
	// not share a connection sets it: ZooKeeper's lockers are sessions.
	// When requests is not nil and the store counts (CountsRequests),
	// every request the client sends adds one to it: its handshake, its
	// heartbeats and the close of its session aside.
	Contender func(ctx context.Context, n StoreNode, requests *atomic.Int64) (cfg locklab.Config, close func(), err error)
	// CountsRequests says Contender counts the requests of its clients:
	// the contended phase reports the requests per lock cycle of the
	// store's rows.
	CountsRequests bool
	// Lock says the rows' contenders wait as the lock's users do: each
	// calls its locker's blocking Lock(ctx, key, ttl), which waits on the
	// store (ZooKeeper's watches), where the other stores' contenders
	// retry Acquire with locklab.Wait's default policy.
	Lock bool
}

// BenchLimit says a bench asks more of a store's servers than they take:
// Msg says what, and what to give instead.
type BenchLimit struct{ Msg string }

func (e *BenchLimit) Error() string { return e.Msg }

// Limit bounds the schedules of a store's cells that fault its server.
type Limit struct {
	// Schedules is the bound.
	Schedules int
	// Where says where it applies, after the number in a page's list of
	// the bounds: "on etcd", "on a PostgreSQL failover".
	Where string
	// Applies says whether it bounds scenario sc's cell (nil: every
	// scenario that faults the server).
	Applies func(sc *Scenario) bool
}

// StoreNode is a node a store's Driver starts (Driver.Start): one server
// or one cluster, which the harness runs a slot of runs on.
type StoreNode interface {
	Node
	// Close stops the node's servers and removes what they wrote.
	Close() error
}

// StartEach starts count nodes side by side with start, for a Driver's
// Start: all of them, or, when one fails, none (those started are closed)
// and the first error.
func StartEach(ctx context.Context, count int, start func(ctx context.Context) (StoreNode, error)) ([]StoreNode, error) {
	nodes := make([]StoreNode, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { nodes[i], errs[i] = start(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			for i, n := range nodes {
				if errs[i] == nil {
					n.Close()
				}
			}
			return nil, err
		}
	}
	return nodes, nil
}

// Store is the servers of one kind that a slot's runs lock on.
type Store interface {
	// Connect gives the Config of client c the store's clients: every
	// operation through them is a step (Client.Send).
	Connect(c *Client, cfg *locklab.Config) error
	// Key returns the key a run locks, for key: itself, or key inside the
	// store's namespace.
	Key(key string) string
	// Empty removes what the earlier runs wrote, before a run.
	Empty(ctx context.Context) error
	// Advance makes d pass on node i's (0-based) clock: the locks whose
	// time runs out expire. It returns how many did.
	Advance(ctx context.Context, i int, d time.Duration) (int, error)
	// Probe reads key on node i outside the schedule: nil when nobody
	// holds it, else the holder's Lease.Token, as a string. The timeline
	// shows it in the server's column, and the wrongful-release check
	// (release.go) compares it, before and after a release that runs
	// while another client holds the lock, with that client's token. A
	// store whose Probe shows another form (a name made for the
	// timeline, as ZooKeeper's) is a HoldProber, which the check asks
	// instead; without either, the check is blind, and
	// release-after-expiry safe whatever the release did.
	Probe(ctx context.Context, i int, key string) (any, error)
	// Crashed is told that client c crashed; it returns once the store
	// has seen the crash (a session ended).
	Crashed(c *Client)
	// Reconnect drops node i's idle connections after a fault that cut
	// them.
	Reconnect(i int)
	// Close releases the store's connections and removes what its runs
	// left; ctx bounds what it asks the servers for that.
	Close(ctx context.Context) error
}

// Renewer is a store whose locks the run can renew outside the schedule
// (renew.go): Unscheduled gives cfg the store's own connections, whose
// requests wait for no grant; Renewed is told of each renewal that went
// through, for the store's own account of the lease's time.
type Renewer interface {
	Unscheduled(cfg *locklab.Config)
	Renewed(lease locklab.Lease)
}

// TimeToucher is a Store that says what a time step does on it, for the
// explorer's reduction: a time step then commutes with the client steps
// that touch none of it (effect.go, docs/reduction.md). A store that is
// not one has its time steps conflict with every step.
type TimeToucher interface {
	// TimeTouch is what Advance of d on every node would do if it ran
	// now, said before it runs: the names of the store's it reads and
	// writes, as its steps' Touch names them, and the clients whose own
	// steps it changes otherwise (it ends their sessions: their next
	// request fails), whose reach the harness names. A nil Touch says it
	// may touch anything. Nothing else may change what it does: another
	// client's step, whatever it touches outside the names, leaves both
	// the same.
	TimeTouch(d time.Duration) (*Touch, []*Client)
}

// Terminator is a store whose server can end a client's sessions from its
// side (the terminate(cN) step): an administrator's kill, an idle-session
// timeout, a pooler closing an idle connection. A lock that lives in a
// session ends with it.
type Terminator interface {
	// Terminate ends client c's sessions on the server and returns once
	// the server has ended them, with how many it ended.
	Terminate(ctx context.Context, c *Client) (int, error)
}

// HoldProber is a Store whose Probe shows the lock as its timeline names
// it rather than as the holder's Lease.Token (ZooKeeper's "c2 #3" for the
// third node in line, made by c2). The wrongful-release check then asks
// it whether a client's hold is still the lock, before and after the
// command of another client's release, where it would compare Probe's
// value with the client's token.
type HoldProber interface {
	// Holds reports whether c's hold of lease is the lock on key on node
	// i (0-based) now, read outside the schedule.
	Holds(ctx context.Context, i int, key string, c *Client, lease locklab.Lease) (bool, error)
}

// nodeStore names the store nodes serve, "" for no node.
func nodeStore(nodes []Node) string {
	if len(nodes) > 0 {
		return nodes[0].Store()
	}
	return ""
}

// expireAll is a duration past every lock's time: advance by it expires
// every lock that has one.
const expireAll = ttlclock.All

// closeEmptyTimeout bounds the emptying of a store's server when a run's
// slot closes: after Ctrl-C the servers may be gone already, and a client
// would retry for ever.
const closeEmptyTimeout = 5 * time.Second

// recoverTimeout bounds the start of the members a failover killed when
// a run's slot closes (slot.close).
const recoverTimeout = 2 * time.Minute
