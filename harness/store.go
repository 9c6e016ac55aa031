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
//     docker), and their faults, as Nodes implementing harness/node's
//     fault interfaces (fault.Killer, fault.Restarter, fault.Pauser,
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
// Touch (touch.go). A step sent without one touches everything.
//
// A store whose connections carry state across operations sends them on
// a Conn: the connection stays busy between an operation's answer and the
// next one, and a transaction open on it (Conn.SetTransaction: Redis's
// MULTI, whose server queues the commands until EXEC) has the explorer run
// its operations whole (stores/redis's MULTI).

package harness

import (
	"context"
	"fmt"
	"io"
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
	// Describe is the line that names the servers Start started: the first
	// runs the store's cells, the others those that fault the server.
	Describe func(first StoreNode, more []StoreNode) string

	// Open makes the store of a slot on nodes (one of Start's, or the
	// nodes given, for the Main store).
	Open func(nodes []Node, o OpenOptions) (Store, error)

	// NA says why scenario sc has no meaning on the store, "" where it
	// has one. It is asked for the scenarios the harness does not rule
	// out itself: MultiNode's are n/a on every store but the Main one.
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
	// Versioned says the store's Store keeps the versioned row of the
	// Scenario.Versioned scenarios (Versioned): they apply to its
	// strategies, and to no other.
	Versioned bool
	// Terminates says the store's Store ends a client's sessions
	// (Terminator) and its locks can live in one: the scenarios whose
	// server ends the holder's session (Scenario.EndsSessions) apply to
	// its strategies. Another store says why they do not in NA.
	Terminates bool
	// Bench is the store's part of `locklab bench --stores`.
	Bench *Bench
	// Stress is the store's part of stress mode (`locklab stress`), nil
	// where it has none. RegisterStore registers it with harness/stress,
	// under the Driver's Name and Title where it gives none of its own: a
	// store's folder registers the one Driver.
	Stress *stress.StoreDriver
	// Abbreviations explains the short names of the store's timelines;
	// common is what every store's timeline shares.
	Abbreviations func(common string) string
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

// Versioned is a store that keeps the versioned row of the
// Scenario.Versioned scenarios: each call is a step of client c's.
type Versioned interface {
	// PrepareVersioned creates the row of key at version 0, outside the
	// schedule, before a run's clients start.
	PrepareVersioned(ctx context.Context, key string) error
	// ReadVersion returns the row's version.
	ReadVersion(ctx context.Context, c *Client) (int64, error)
	// WriteVersioned updates the row if its version is still v: it
	// reports whether it did.
	WriteVersioned(ctx context.Context, c *Client, v int64) (bool, error)
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

// ErrStopped is what a store's client gets for an operation once its
// run is over.
var ErrStopped = errStopped

// ErrCrashed is what a crashed client's store gets for an operation, and
// where it would open a connection.
var ErrCrashed = errCrashed

// ErrUnreachable is what an operation to a node the run took down, or
// that a partition cut the client off from, fails with (wrapped, with the
// node's name).
var ErrUnreachable = errUnreachable

// Client is a run's client as its store sees it.
type Client struct {
	r *run
	c *client
}

// ID is the client's number: 1 for c1.
func (c *Client) ID() int { return c.c.id }

// Isolated reports whether a partition cut the client off (isolate).
func (c *Client) Isolated() bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.c.isolated
}

// Crashed reports whether the client crashed.
func (c *Client) Crashed() bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.c.crashed
}

// Silent reports whether the client's process sends nothing now, not
// even a heartbeat: it crashed, a partition cut it off, or its whole
// process is paused (pause, or a sleep step).
func (c *Client) Silent() bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.c.crashed || c.c.isolated || c.c.paused || c.c.sleeping
}

// Holding returns the client's lease while it holds the lock.
func (c *Client) Holding() (locklab.Lease, bool) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.c.lease, c.c.holding
}

// MultiNode reports whether the client's strategy locks on several
// independent nodes at once (Redlock): the store gives it one connection
// source per node, and each of its steps ends when its answer is in.
func (c *Client) MultiNode() bool { return c.r.spec.multi }

// FailsOver reports whether the run's scenario fails a node over to its
// replica: there the replica misses every write but those a client waits
// for (Redis's WAIT).
func (c *Client) FailsOver() bool { return c.r.spec.prepare }

// Context is the run's context: a store's connections to its servers
// last as long as it does.
func (c *Client) Context() context.Context { return c.r.ctx }

// Locker is the strategy the client runs (nil before it is built).
func (c *Client) Locker() locklab.Locker { return c.c.locker }

// Wait says that the client waits for an event of its store's (a watch's
// notification, say) and sends nothing until it comes: the scheduler runs
// the other clients meanwhile. It ends with the client's next operation
// or Wake. The store calls it before it ends the step after which the
// client waits (Sent.Done); what, when not "", says in that step's notes
// what the client waits for.
func (c *Client) Wait(what string) {
	c.r.mu.Lock()
	c.c.waiting = true
	if what != "" {
		c.r.noteLocked(c.c, "waits for %s", what)
	}
	c.r.mu.Unlock()
	c.r.notify()
}

// Wake says that the event a waiting client waits for is on its way: the
// scheduler waits for the client's next operation again. The store calls
// it before it ends the step that causes the event, so that no step runs
// between the cause and the client's answer to it.
func (c *Client) Wake() {
	c.r.mu.Lock()
	if c.c.waiting {
		c.c.waiting = false
		c.c.changed = time.Now()
	}
	c.r.mu.Unlock()
	c.r.notify()
}

// Fail ends the run with err: the store cannot go on.
func (c *Client) Fail(err error) { c.r.fail(err) }

// Send submits one operation of the client on node (1-based) to the
// scheduler, shown as label with args, and waits for its grant. A node
// the run took down, or a client cut off from it, refuses the operation
// before it is sent: Step then returns an error that wraps the
// unreachable node, the step already recorded. Otherwise the caller sends
// the operation and calls Done with its answer.
func (c *Client) Send(ctx context.Context, node int, label string, args []any) (*Sent, error) {
	return c.SendTouching(ctx, node, label, args, nil)
}

// SendTouching is Send of an operation that reads and writes what t says
// (nil: everything), which the step's event keeps (Event.Touch).
func (c *Client) SendTouching(ctx context.Context, node int, label string, args []any, t *Touch) (*Sent, error) {
	r := c.r
	own := &owner{}
	q, err := r.submitTouching(ctx, c.c, own, node, CommandText(label, args), "", t)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	down := r.down[node-1] || c.c.isolated
	r.mu.Unlock()
	if down {
		err := fmt.Errorf("%w: n%d", errUnreachable, node)
		r.reply(q, nil, err, false)
		r.idle(c.c, own)
		return nil, err
	}
	return &Sent{c: c, q: q, own: own, watch: r.watchRelease(c.c, node)}, nil
}

// Conn is one connection of a client, for a store whose operations on a
// connection share its state: its operations' steps are the connection's,
// which stays busy from an operation's grant until its next operation or
// Close (a client's library reads the answer and goes on, on the same
// connection, before the scheduler takes it for settled), and a
// transaction open on it (Transaction) has the explorer run its
// operations whole, no other client's step between them, as a server
// that queues a transaction's commands runs them.
type Conn struct {
	c   *Client
	own owner
}

// Conn opens a connection of the client.
func (c *Client) Conn() *Conn { return &Conn{c: c} }

// SendTouching submits one operation on the connection to node (1-based)
// to the scheduler, shown as text, touching what t says (nil:
// everything), and waits for its grant. A node the run took down, or a
// client cut off from it, refuses the operation before it is sent: the
// step is recorded, and the error wraps ErrUnreachable. Otherwise the
// caller sends the operation and calls Reply with its answer.
func (k *Conn) SendTouching(ctx context.Context, node int, text []string, t *Touch) (*Sent, error) {
	r, c := k.c.r, k.c.c
	q, err := r.submitTouching(ctx, c, &k.own, node, text, "", t)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	down := r.down[node-1] || c.isolated
	r.mu.Unlock()
	if down {
		err := fmt.Errorf("%w: n%d", errUnreachable, node)
		r.reply(q, nil, err, false)
		return nil, err
	}
	return &Sent{c: k.c, q: q, own: &k.own, watch: r.watchRelease(c, node)}, nil
}

// Transaction reports whether a transaction is open on the connection.
func (k *Conn) Transaction() bool {
	k.c.r.mu.Lock()
	defer k.c.r.mu.Unlock()
	return k.own.multi
}

// SetTransaction says whether a transaction is open on the connection:
// while one is, the explorer runs the connection's next operation before
// any other step.
func (k *Conn) SetTransaction(open bool) {
	k.c.r.mu.Lock()
	k.own.multi = open
	k.c.r.mu.Unlock()
}

// Continue records what the connection sent to complete its last step
// (the EVAL a client's library sends after a NOSCRIPT answer belongs to
// the EVALSHA's step): extra as the step's Extra, and its answer, v or
// err, as the step's reply. A multi-node client's step ends with it.
func (k *Conn) Continue(extra []string, v any, err error) {
	r, c := k.c.r, k.c.c
	r.mu.Lock()
	if c.lastEvent >= 0 && c.lastEvent < len(r.hist.Events) {
		e := &r.hist.Events[c.lastEvent]
		e.Extra = extra
		e.Reply = fmtReply(v, err)
	}
	r.mu.Unlock()
	if r.spec.multi {
		r.idle(c, &k.own)
	}
}

// Close closes the connection: a transaction open on it ends, and the
// client is no longer busy on it.
func (k *Conn) Close() {
	r := k.c.r
	r.mu.Lock()
	k.own.multi = false
	r.mu.Unlock()
	r.idle(k.c.c, &k.own)
}

// Sent is a granted operation of a client: one step of the schedule.
type Sent struct {
	c     *Client
	q     *request
	own   *owner
	watch *releaseWatch
}

// LoseReply reports whether the operation's reply is to be lost
// (lose(cN)): the store sends it, lets the server answer, then drops the
// connection the answer would come on, so that the client's library sees
// the connection drop with the operation done on the server; Done records
// what the server answered. It is true for one operation per lose step.
func (s *Sent) LoseReply() bool { return s.c.r.takeLost(s.c.c, s.q) }

// ErrLostReply is what a store's client reads where a lost reply was
// (LoseReply): the end of its connection.
var ErrLostReply = fmt.Errorf("%w: the connection dropped before the reply came", io.ErrUnexpectedEOF)

// Reply records the answer of an operation sent on a Conn (v, shown as
// the step's reply, or err) and judges the step; the connection stays
// busy until its next operation or Close, but a multi-node client's step
// ends here. more says the step goes on (Conn.Continue completes it).
func (s *Sent) Reply(v any, err error, more bool) {
	s.c.r.reply(s.q, v, err, more)
	s.watch.judge(s.q)
}

// Note adds a note to the step's event.
func (s *Sent) Note(note string) {
	r := s.c.r
	r.mu.Lock()
	e := &r.hist.Events[s.q.event]
	e.Notes = append(e.Notes, note)
	r.mu.Unlock()
}

// Done records the operation's answer (v, shown as the step's reply, or
// err) and ends the step.
func (s *Sent) Done(v any, err error) {
	r := s.c.r
	r.reply(s.q, v, err, false)
	s.watch.judge(s.q)
	r.idle(s.c.c, s.own)
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
