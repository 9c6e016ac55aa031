// bench --stores: the locks of every store measured in one run, so that
// their ratios hold on a noisy machine: Redis's set-nx-px and Redlock on 3
// and 5 masters, etcd-lease on a three-member etcd cluster, and the three
// PostgreSQL locks on a throwaway server.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
	"github.com/locklab/locklab/internal/tooling/benchutil"
	"github.com/locklab/locklab/internal/tooling/namespace"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/redis"
	"github.com/locklab/locklab/strategies"
)

// storeRedis names Redis among --stores: its registered store's name.
const storeRedis = redis.Name

// benchStores are the stores --stores knows, in the order of the rows:
// Redis, then the registered stores in their Bench.Row order.
var benchStores = func() []string {
	ds := slices.DeleteFunc(harness.Stores(), func(d *harness.Driver) bool { return d.Bench == nil })
	slices.SortStableFunc(ds, func(a, b *harness.Driver) int { return a.Bench.Row - b.Bench.Row })
	out := []string{storeRedis}
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}()

// storeRow is one lock of the comparison: a strategy of a store, on so
// many of its nodes (Redlock's masters; 1 elsewhere).
type storeRow struct {
	store, strategy string
	nodes           int
}

// name is the row's name in the table: the strategy, and Redlock's
// masters.
func (r storeRow) name() string {
	if r.nodes > 1 {
		return fmt.Sprintf("%s (%d masters)", r.strategy, r.nodes)
	}
	return r.strategy
}

// storeRows are the rows of store.
func storeRows(store string) []storeRow {
	switch store {
	case storeRedis:
		return []storeRow{{storeRedis, "set-nx-px", 1}, {storeRedis, "redlock", 3}, {storeRedis, "redlock", 5}}
	}
	var out []storeRow
	if d, err := harness.LookupStore(store); err == nil && d.Bench != nil {
		for _, name := range d.Bench.Strategies {
			out = append(out, storeRow{store, name, 1})
		}
	}
	return out
}

// storesOptions are the flags of bench --stores.
type storesOptions struct {
	stores         []string
	rounds, cycles int
	contenders     int
	contendFor     time.Duration
	asJSON         bool
}

// checkStores refuses a --stores value that names no store known, before
// anything starts, and returns the stores in the order of the rows.
func (g *globals) checkStores(cmd *cobra.Command, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, g.args.badFlag(cmd, "stores", "", "names no store; the stores are %s", strings.Join(benchStores, ", "))
	}
	for _, s := range names {
		if !slices.Contains(benchStores, s) {
			return nil, g.args.badFlag(cmd, "stores", s, "unknown store; the stores are %s", strings.Join(benchStores, ", "))
		}
	}
	var out []string
	for _, s := range benchStores {
		if slices.Contains(names, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// measuredRow is a row and, unless skipped, what builds its lockers.
type measuredRow struct {
	storeRow
	skipped   string
	newLocker func() (locklab.Locker, error)
	key       string
	cycle     benchutil.Latency
	contended benchutil.ContendResult
	// retried counts the uncontended acquires tried again after a
	// failure the strategy marks worth another try (a Redlock round
	// whose nodes answered too late).
	retried int
	// opened are the clients newLocker opened for the run under way, of
	// a store that gives each locker its own (harness.Bench.Contender).
	opened []func()
	// waitsInLock: the contenders wait in their locker's own Lock
	// (harness.Bench.Lock), not with locklab.Wait.
	waitsInLock bool
	// counting: newLocker's clients count their requests into requests
	// (harness.Bench.CountsRequests), the contended runs' alone; cycles
	// counts the lock cycles those runs completed.
	counting         bool
	requests, cycles atomic.Int64
}

// blockingLocker is a lock with a blocking acquire, which waits on the
// store until it holds the lock (strategies/zklock's Lock).
type blockingLocker interface {
	locklab.Locker
	Lock(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error)
}

// contender is a contended run's locker of a row that waits in its Lock or
// counts its requests. Its Acquire is the locker's Lock, where the row
// waits in it: locklab.Wait's first attempt then holds the lock, and
// never retries. Its Release counts the cycle.
type contender struct {
	locklab.Locker
	lock   func(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error)
	cycles *atomic.Int64
}

func (c *contender) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if c.lock != nil {
		return c.lock(ctx, key, ttl)
	}
	return c.Locker.Acquire(ctx, key, ttl)
}

func (c *contender) Release(ctx context.Context, lease locklab.Lease) error {
	err := c.Locker.Release(ctx, lease)
	if err == nil {
		c.cycles.Add(1)
	}
	return err
}

// newContender builds a locker of the row's contended runs.
func (r *measuredRow) newContender() (locklab.Locker, error) {
	l, err := r.newLocker()
	if err != nil || (!r.waitsInLock && !r.counting) {
		return l, err
	}
	c := &contender{Locker: l, cycles: &r.cycles}
	if r.waitsInLock {
		b, ok := l.(blockingLocker)
		if !ok {
			return nil, fmt.Errorf("%s has no blocking Lock to wait in", r.strategy)
		}
		c.lock = b.Lock
	}
	return c, nil
}

// requestsPerCycle is the requests the contended runs sent per lock cycle
// they completed, where they were counted.
func (r *measuredRow) requestsPerCycle() (float64, bool) {
	if !r.counting || r.cycles.Load() == 0 {
		return 0, false
	}
	return float64(r.requests.Load()) / float64(r.cycles.Load()), true
}

// closeOpened closes the clients newLocker opened.
func (r *measuredRow) closeOpened() {
	for _, c := range r.opened {
		c()
	}
	r.opened = nil
}

// cycleOnce is one uncontended acquire and release on the row's key, tried
// again as cycleRetry does: on a loaded machine a Redlock round may find
// its nodes too slow. Its time counts: a caller would wait for it too.
func (r *measuredRow) cycleOnce(ctx context.Context, l locklab.Locker) error {
	return cycleRetry(ctx, l, r.key, &r.retried)
}

// benchStoresRun starts the servers of the stores asked for (those
// installed; the others' rows are skipped, saying why), measures every
// row in one run and prints the table or, with --json, the document.
func benchStoresRun(cmd *cobra.Command, g *globals, o storesOptions) (rerr error) {
	ctx := cmd.Context()
	rows, others := storesRows(o.stores)
	var servers []storesServer
	var srv *stores.Servers
	if len(others) > 0 {
		backend, err := stores.Backend(ctx, g.backend)
		if err != nil && !g.addrsBackend() {
			return err
		}
		srv, err = g.startStores(ctx, io.Discard, backend, others)
		if err != nil {
			return err
		}
		defer func() {
			if err := srv.Close(); err != nil && rerr == nil {
				rerr = err
			}
		}()
	}
	for _, st := range o.stores {
		var s *storesServer
		var closeRows func() error
		var err error
		if st == storeRedis {
			s, closeRows, err = g.openRedisRows(cmd, rows)
		} else {
			s, closeRows, err = g.openStoreRows(cmd, srv, st, rows, o.contenders)
		}
		if err != nil {
			return err
		}
		if s == nil {
			continue
		}
		defer func() {
			if err := closeRows(); err != nil && rerr == nil {
				rerr = err
			}
		}()
		servers = append(servers, *s)
	}
	var live []*measuredRow
	for _, r := range rows {
		if r.skipped == "" {
			live = append(live, r)
		}
	}
	if len(live) > 0 {
		if err := measureStores(ctx, live, o); err != nil {
			return err
		}
	}
	var err error
	if o.asJSON {
		err = render.JSON(cmd.OutOrStdout(), storesJSON(o, servers, rows))
	} else {
		err = printStores(cmd.OutOrStdout(), o, servers, rows)
	}
	if err == nil && len(live) == 0 {
		// The table says why each row was skipped; with no row measured,
		// the run measured nothing.
		err = errors.New("no lock was measured: every row was skipped")
	}
	return err
}

// storesRows is the rows of the stores named, a store's skipped, saying
// why, where its servers are not installed, and the strategies whose
// servers are to start: the rows' of the other stores than Redis that
// are not skipped.
func storesRows(names []string) (rows []*measuredRow, others []string) {
	for _, st := range names {
		var skipped string
		if st != storeRedis {
			if err := stores.Installed(st); err != nil {
				skipped = fmt.Sprintf("%s is not installed: %v", st, err)
			}
		}
		for _, r := range storeRows(st) {
			rows = append(rows, &measuredRow{storeRow: r, skipped: skipped})
			if skipped == "" && st != storeRedis {
				others = append(others, r.strategy)
			}
		}
	}
	return rows, others
}

// openRedisRows starts 5 Redis nodes and sets up the Redis rows among
// rows on them, each on a key of a namespace of its own (a row that
// takes more nodes than --addr gives is skipped). It returns the
// servers' description, and what deletes the namespace's keys and then
// stops the nodes.
func (g *globals) openRedisRows(cmd *cobra.Command, rows []*measuredRow) (*storesServer, func() error, error) {
	c, _, err := g.cluster(cmd.Context(), io.Discard, 5)
	if err != nil {
		return nil, nil, err
	}
	var nodes []locklab.ConnSource
	for _, n := range c.Nodes() {
		nodes = append(nodes, n.Pool())
	}
	// The keys are a namespace's of their own, deleted at the
	// end: on a server the user runs, bench touches nothing else.
	ns := namespace.New()
	closeRows := func() error {
		err := namespace.SweepAll(ns, nodes)
		closeAndTell(cmd.ErrOrStderr(), c)
		return err
	}
	for _, r := range rows {
		if r.store != storeRedis {
			continue
		}
		if r.nodes > len(nodes) {
			r.skipped = fmt.Sprintf("it takes %d Redis servers, and --addr gives %d", r.nodes, len(nodes))
			continue
		}
		cfg := locklab.Config{Pool: nodes[0]}
		if r.nodes > 1 {
			cfg = locklab.Config{Nodes: nodes[:r.nodes]}
		}
		r.key = ns.Key(fmt.Sprintf("bench:%s:%d", r.strategy, r.nodes))
		r.newLocker = func() (locklab.Locker, error) { return strategies.New(r.strategy, cfg) }
	}
	return &storesServer{storeRedis, c.Describe()}, closeRows, nil
}

// openStoreRows opens store st's bench (harness.Bench.Open) on its first
// server of srv for contenders clients, and sets up st's rows among rows
// on it. It returns the server's description, or nil where st has no
// server started, and what closes the bench.
func (g *globals) openStoreRows(cmd *cobra.Command, srv *stores.Servers, st string, rows []*measuredRow, contenders int) (*storesServer, func() error, error) {
	ctx := cmd.Context()
	n := srv.First(st)
	if n == nil {
		return nil, nil, nil
	}
	d, err := harness.LookupStore(st)
	if err != nil {
		return nil, nil, err
	}
	cfg, server, closeBench, err := d.Bench.Open(ctx, n, contenders)
	if lim, ok := errors.AsType[*harness.BenchLimit](err); ok {
		return nil, nil, g.args.badFlag(cmd, "contenders", strconv.Itoa(contenders), "%s", lim.Msg)
	}
	if err != nil {
		return nil, nil, err
	}
	for _, r := range rows {
		if r.store == st {
			r.key = "bench:" + r.strategy
			r.waitsInLock = d.Bench.Lock
			r.counting = d.Bench.Contender != nil && d.Bench.CountsRequests
			r.newLocker = func() (locklab.Locker, error) { return strategies.New(r.strategy, cfg) }
			if open := d.Bench.Contender; open != nil {
				// A client of its own for each locker, counting
				// its requests where the store can.
				r.newLocker = func() (locklab.Locker, error) {
					cfg, closeC, err := open(ctx, n, &r.requests)
					if err != nil {
						return nil, err
					}
					r.opened = append(r.opened, closeC)
					return strategies.New(r.strategy, cfg)
				}
			}
		}
	}
	return &storesServer{st, server}, func() error { closeBench(); return nil }, nil
}

// benchTTL is every lease's: long enough that none expires during a
// cycle, and whole seconds for etcd.
const benchTTL = time.Minute

// measureStores measures the uncontended cycles of rows in strict
// alternation (benchutil.InterleavedLatency), then their contended runs,
// one row after the other, round after round. The clients a row's lockers
// opened of their own are closed once each run is over.
func measureStores(ctx context.Context, rows []*measuredRow, o storesOptions) error {
	defer func() {
		for _, r := range rows {
			r.closeOpened()
		}
	}()
	entries := make([]benchutil.TimedEntry, len(rows))
	for i, r := range rows {
		l, err := r.newLocker()
		if err != nil {
			return fmt.Errorf("%s: %w", r.name(), err)
		}
		entries[i] = benchutil.TimedEntry{Name: r.name(), F: func() error { return r.cycleOnce(ctx, l) }}
	}
	res, err := benchutil.InterleavedLatency(entries, o.rounds, o.cycles)
	if err != nil {
		return err
	}
	for i, r := range rows {
		r.cycle = res[i]
		r.closeOpened()
		r.requests.Store(0) // the contended runs' alone
	}
	for round := 0; round < o.rounds; round++ {
		for k := range rows {
			r := rows[(k+round)%len(rows)]
			c, err := benchutil.Contend(ctx, r.newContender, r.key+":contended", o.contenders, benchTTL, o.contendFor)
			r.closeOpened()
			if err != nil {
				return fmt.Errorf("%s, contended: %w", r.name(), err)
			}
			r.contended.Add(c)
		}
	}
	return nil
}

func storeTitle(store string) string { return harness.StoreTitle(store) }
