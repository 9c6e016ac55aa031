// Package locklabtest puts a lock of your own through locklab's race
// harness from your own go test: the catalog's scenarios (the C1/C2 double
// acquire, a holder paused past its TTL, a server restarted, a failover
// that loses the key, ...), each explored over every interleaving of the
// clients' commands within the bounds, on real servers: redis-server
// processes, or, for a lock whose Description.Family names another store
// ("etcd", "postgres", "zookeeper"), that store's, as `locklab matrix`
// starts them. Such a lock's factory receives the store's client in
// Config.Store, instrumented so that each request is one step.
//
//	func TestMyLock(t *testing.T) {
//		locklabtest.Run(t, strategies.Description{Name: "my-lock", Family: "mine"},
//			func(cfg locklab.Config) (locklab.Locker, error) { return mylock.New(cfg.Pool), nil })
//	}
//
// The factory receives a locklab.Config whose Pool (Nodes, for a lock over
// several masters) is the harness's: every command sent through it is one
// step of the schedule, so write the lock against the redigo connections
// it gives, or on a go-redis or rueidis client made of them
// (goredis.NewClient, in the module
// github.com/locklab/locklab/adapters/goredis, or rueidis.NewClient, in
// github.com/locklab/locklab/adapters/rueidis), not a client of its own
// (Run fails the test, saying so, when the lock sent no command through
// them, or when the servers themselves saw a client of the lock's own
// beside them: harness.StartAudit, a store's Driver.Audit). Run fails the test for each scenario
// whose exploration found a violation, with the counterexample's timeline
// and its schedule; a lock known to break in some scenarios pins them with
// ExpectViolation.
package locklabtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
	serversaudit "github.com/locklab/locklab/internal/tooling/audit"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/counting"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/redis"
	"github.com/locklab/locklab/stores/redis/redisnode"
	"github.com/locklab/locklab/strategies"
)

// Option changes what Run explores.
type Option func(*config)

type config struct {
	scenarios   []string
	preemptions int
	schedules   int
	backend     string
	expect      []string
	timeout     time.Duration
	extra       []*harness.Scenario
}

// Scenarios restricts the run to the scenarios named (every one of the
// catalog that applies to the lock by default).
func Scenarios(names ...string) Option { return func(c *config) { c.scenarios = names } }

// Preemptions bounds the preemptions per schedule (default 2, as
// `locklab matrix`); -1 explores without a bound.
func Preemptions(n int) Option { return func(c *config) { c.preemptions = n } }

// MaxSchedules bounds the schedules of each scenario (default
// harness.MatrixSchedules on Redis, harness.StoreSchedules on the other
// stores, as `locklab matrix`); a scenario that reaches it without a
// violation passes, and the log says it was not explored to the end.
func MaxSchedules(n int) Option { return func(c *config) { c.schedules = n } }

// Backend runs the Redis servers as local processes ("process", the
// default: redis-server must be installed) or in containers ("docker").
func Backend(name string) Option { return func(c *config) { c.backend = name } }

// ExpectViolation names the scenarios in which the lock is known to
// break: Run fails the test when one of them finds no violation, and not
// when it finds one.
func ExpectViolation(scenarios ...string) Option {
	return func(c *config) { c.expect = append(c.expect, scenarios...) }
}

// With runs scenarios of one's own beside the catalog's, whether or not
// Scenarios restricts those (Scenarios with their names alone runs them
// alone): a harness.Scenario with a name of its own,
// the clients' programs (harness.MustPrograms), the property it checks,
// and the faults the explorer may place. ExpectViolation and Replay take
// its name as they take the catalog's; Replay needs the same With.
func With(scenarios ...*harness.Scenario) Option {
	return func(c *config) { c.extra = append(c.extra, scenarios...) }
}

// Timeout bounds the whole run, the servers' start included (default 10
// minutes).
func Timeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Run registers the lock under d.Name (a name of its own: one registered
// already, a built-in's say, is refused; a test run again with -count
// keeps its first factory), starts three Redis servers, the
// first with a replica, explores every scenario that applies to it, logs
// each verdict, and fails t for each violation found, except in the
// scenarios of ExpectViolation, which must find one. It returns the
// matrix of the lock's cells.
func Run(t testing.TB, d strategies.Description, f strategies.Factory, opts ...Option) *harness.MatrixResult {
	t.Helper()
	c := config{preemptions: 2, backend: backends.Process, timeout: 10 * time.Minute}
	for _, o := range opts {
		o(&c)
	}
	sent, err := register(d, f)
	if err != nil {
		t.Fatalf("locklabtest: %v", err)
	}
	var before int64
	if sent != nil {
		before = sent.Load()
	}
	for _, sc := range c.extra {
		if err := harness.CheckScenario(sc); err != nil {
			t.Fatalf("locklabtest: %v", err)
		}
	}
	for _, name := range append(slices.Clone(c.scenarios), c.expect...) {
		if _, err := harness.LookupWith(name, c.extra...); err != nil {
			t.Fatalf("locklabtest: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if c.preemptions == 0 {
		c.preemptions = -1 // the matrix's none
	}
	o := harness.MatrixOptions{Strategies: []string{d.Name}, Scenarios: slices.Clone(c.scenarios),
		MaxPreemptions: c.preemptions, MaxSchedules: c.schedules, Workers: 4, Parallel: 4,
		// A lock of one's own may tell its clients apart by the order
		// they were built in (a counter, a table of ids): clients with
		// the same program are not taken to be interchangeable.
		NoSymmetry: true, Extra: c.extra}
	if len(c.scenarios) > 0 {
		for _, sc := range c.extra {
			if !slices.Contains(o.Scenarios, sc.Name) {
				o.Scenarios = append(o.Scenarios, sc.Name)
			}
		}
	}
	if o.MaxSchedules == 0 {
		o.MaxSchedules = harness.MatrixSchedules
	}
	srv := start(t, ctx, d.Name, c.backend)
	o.Nodes = srv.nodes
	if srv.store != "" {
		o.Stores = map[string][]harness.Node{srv.store: srv.nodes}
		o.Nodes, o.StartFaultServer = nil, stores.FaultServer(c.backend)
		o.StorePreemptions, o.StoreSchedules = c.preemptions, cmp.Or(c.schedules, harness.StoreSchedules)
	}
	// The servers' own count of their clients, where the store keeps
	// one: a client of the lock's own beside the one it was given.
	audit, err := harness.StartAudit(ctx, cmp.Or(srv.store, redis.Name), srv.nodes)
	if err != nil {
		t.Fatalf("locklabtest: reading the servers' counts of their clients: %v", err)
	}
	m, err := harness.Matrix(ctx, o)
	var hidden string
	// Read even when the run failed, on the run's context (each store's
	// audit bounds its own reads of a server that may hang): an
	// unscheduled command is a likely cause (a step the schedule named
	// never came). A run that ran out of time leaves nothing to read with.
	if ctx.Err() == nil {
		found, unread := serversaudit.Split(audit(ctx))
		if len(found) > 0 {
			hidden = fmt.Sprintf("%s talked to %s through a client of its own beside the one its factory was given "+
				"(%s): the harness scheduled none of that client's requests, and no verdict covers them.\n%s",
				d.Name, storeTitle(srv.store), clientField(srv.store), strings.Join(found, "\n"))
		}
		for _, err := range unread {
			t.Errorf("locklabtest: the servers' audit could not read %v", err)
		}
	}
	unscheduled := fmt.Sprintf("%s sent no command through the connections its factory was given (Config.Pool, Config.Nodes): "+
		"a lock that talks to Redis through a client of its own is not scheduled, and its verdicts show nothing", d.Name)
	silent := sent != nil && sent.Load() == before && o.Stores == nil
	if err != nil {
		switch {
		case hidden != "":
			t.Fatalf("locklabtest: %s\n(the run: %v)", hidden, err)
		case silent:
			t.Fatalf("locklabtest: %s (the run: %v)", unscheduled, err)
		}
		t.Fatalf("locklabtest: %v", err)
	}
	if hidden != "" {
		t.Errorf("locklabtest: %s", hidden)
	}
	// The failing cells' counterexamples again, with the key read after
	// every step, for their timelines.
	if _, err := harness.Record(ctx, m, srv.nodes); err != nil {
		t.Logf("locklabtest: replaying the counterexamples with the key recorded: %v", err)
	}
	report(t, m, c.expect)
	if silent && slices.ContainsFunc(m.Cells, func(c harness.Cell) bool { return c.Outcome != harness.NA }) {
		t.Errorf("%s", unscheduled)
	}
	return m
}

// counts count, by strategy name, the commands each lock registered here
// sent through the connections the harness gave its factory: none means
// it talks to Redis through a client of its own, which the harness does
// not schedule.
var counts sync.Map // name → *atomic.Int64

// register registers d with f, its connections counted, unless this
// package registered d's name before (a test run again with -count: the
// first factory stays); a name registered elsewhere is refused. It
// returns the lock's count of commands.
func register(d strategies.Description, f strategies.Factory) (*atomic.Int64, error) {
	if _, _, err := strategies.Lookup(d.Name); err == nil {
		if n, ok := counts.Load(d.Name); ok {
			return n.(*atomic.Int64), nil
		}
		return nil, fmt.Errorf("a strategy named %q is registered already (a built-in one, or another package's): give the lock a name of its own", d.Name)
	}
	if f == nil {
		return nil, fmt.Errorf("%s: nil factory", d.Name)
	}
	if onStore(d.Family) && !slices.Contains(d.Options, strategies.OptStore) {
		// A lock on another store takes its client from Config.Store,
		// which New refuses to a Description that does not list it.
		d.Options = append(slices.Clone(d.Options), strategies.OptStore)
	}
	count := new(atomic.Int64)
	counts.Store(d.Name, count)
	counted := func(cfg locklab.Config) (locklab.Locker, error) {
		if cfg.Pool != nil {
			cfg.Pool = &counting.Source{Src: cfg.Pool, Count: count}
		}
		if len(cfg.Nodes) > 0 {
			nodes := make([]locklab.ConnSource, len(cfg.Nodes))
			for i, n := range cfg.Nodes {
				nodes[i] = &counting.Source{Src: n, Count: count}
			}
			cfg.Nodes = nodes
		}
		l, err := f(cfg)
		if err == nil && l == nil {
			err = fmt.Errorf("%s's factory returned a nil Locker and no error", d.Name)
		}
		return l, err
	}
	return count, strategies.Register(d, counted)
}

// onStore reports whether family names a registered store other than
// Redis, whose client a lock of the family gets in Config.Store.
func onStore(family string) bool {
	for _, d := range harness.Stores() {
		if d.Name == family && !d.Main {
			return true
		}
	}
	return false
}

// servers are the servers a lock runs on: three Redis nodes, or the
// nodes of the store it locks on (store).
type servers struct {
	store string
	nodes []harness.Node
}

// start starts the servers the strategy name locks on, stopped when the
// test ends: that store's, as `locklab matrix` starts them, for a lock on
// another store; else three Redis servers, the first with a replica for
// the scenarios that fail it over.
func start(t testing.TB, ctx context.Context, name, backend string) servers {
	t.Helper()
	st := stores.Of(name)
	if st == "" {
		nodes, stop, err := redis.StartMatrixNodes(ctx, redisnode.Options{Backend: backend, Label: "locklabtest"})
		if err != nil {
			t.Fatalf("locklabtest: starting the Redis servers: %v", err)
		}
		t.Cleanup(func() { closeAndSay(t, "Redis", stop) })
		return servers{nodes: nodes}
	}
	if err := stores.Installed(st); err != nil {
		t.Fatalf("locklabtest: %s locks on %s: %v", name, st, err)
	}
	srv, err := stores.Start(ctx, backend, []string{name}, nil)
	if err != nil {
		t.Fatalf("locklabtest: starting the %s servers: %v", st, err)
	}
	t.Cleanup(func() { closeAndSay(t, st, srv.Close) })
	return servers{store: st, nodes: srv.Nodes[st]}
}

// storeTitle is how messages name the store (Redis where store is "").
func storeTitle(store string) string {
	if d, err := harness.LookupStore(cmp.Or(store, redis.Name)); err == nil {
		return d.Title
	}
	return store
}

// clientField names the Config fields that carry a lock's client on store.
func clientField(store string) string {
	if store == "" {
		return "Config.Pool, Config.Nodes"
	}
	return "Config.Store"
}

// closeAndSay stops servers with stop, failing t when that fails.
func closeAndSay(t testing.TB, what string, stop func() error) {
	if err := stop(); err != nil {
		t.Errorf("locklabtest: stopping the %s servers: %v", what, err)
	}
}

// Replay runs one schedule of a scenario on the lock, as a failure of Run
// names it, logs its timeline and returns its history: the counterexample
// again, step by step, to read or to debug the lock on. Options other
// than Backend, Timeout and With do not apply.
func Replay(t testing.TB, d strategies.Description, f strategies.Factory, scenario, schedule string, opts ...Option) *harness.History {
	t.Helper()
	c := config{backend: backends.Process, timeout: 10 * time.Minute}
	for _, o := range opts {
		o(&c)
	}
	if _, err := register(d, f); err != nil {
		t.Fatalf("locklabtest: %v", err)
	}
	sc, err := harness.LookupWith(scenario, c.extra...)
	if err != nil {
		t.Fatalf("locklabtest: %v", err)
	}
	cs, err := sc.Resolve(d.Name)
	if err != nil {
		t.Fatalf("locklabtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	srv := start(t, ctx, d.Name, c.backend)
	h, err := harness.Run(ctx, harness.RunOptions{Case: cs, Nodes: srv.nodes, Schedule: schedule})
	if err != nil {
		t.Fatalf("locklabtest: %s, schedule %q: %v", cs.Name(), schedule, err)
	}
	t.Log("\n" + render.Timeline(h))
	return h
}

// report logs each cell and fails t for each one that is not as expected.
func report(t testing.TB, m *harness.MatrixResult, expect []string) {
	t.Helper()
	ran := 0
	for _, cell := range m.Cells {
		if cell.Outcome == harness.NA {
			continue
		}
		ran++
		line := fmt.Sprintf("%s: %s, %d schedules in %v", cell.Scenario, cell.Outcome, cell.Schedules, cell.Elapsed.Round(time.Millisecond))
		if cell.Outcome == harness.Safe && !cell.Complete {
			line += " (" + cell.Message + ")"
		}
		t.Log(line)
		want := slices.Contains(expect, cell.Scenario)
		switch {
		case cell.Outcome == harness.Safe && want:
			t.Errorf("%s: expected a violation, found none in %d schedules", cell.Scenario, cell.Schedules)
		case cell.Outcome != harness.Safe && !want:
			t.Errorf("%s", Failure(cell))
		}
	}
	for _, name := range expect {
		if cell, ok := m.Cell(m.Strategies[0], name); !ok || cell.Outcome == harness.NA {
			t.Errorf("%s: expected a violation, but the scenario does not apply to the lock", name)
		}
	}
	if ran == 0 {
		t.Errorf("no scenario applies to %s: nothing was explored", strings.Join(m.Strategies, ", "))
	}
}

// Failure describes a cell that found a violation: its verdict, the
// scenario's story, the counterexample's timeline and its schedule.
func Failure(cell harness.Cell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", cell.Scenario, cell.Outcome)
	if cell.Property != "" {
		fmt.Fprintf(&b, " (%s)", cell.Property)
	}
	if cell.Message != "" {
		fmt.Fprintf(&b, ": %s", cell.Message)
	}
	if sc, err := harness.Lookup(cell.Scenario); err == nil {
		told := sc.For(harness.StoreOfStrategy(cell.Strategy)) // the story as the cell's store runs it
		fmt.Fprintf(&b, "\n%s: %s", told.Title, told.Story)
	}
	if cell.Counterexample != nil {
		b.WriteString("\n" + render.Timeline(cell.Counterexample))
	}
	if cell.Schedule != "" {
		with := ""
		if _, err := harness.Lookup(cell.Scenario); err != nil {
			with = ", locklabtest.With(sc)" // a scenario of one's own
		}
		fmt.Fprintf(&b, "\nreplay: locklabtest.Replay(t, d, f, %q, %q%s)", cell.Scenario, cell.Schedule, with)
	}
	return b.String()
}
