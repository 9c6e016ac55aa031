package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/benchutil"
	"github.com/locklab/locklab/internal/tooling/counting"
	"github.com/locklab/locklab/internal/tooling/namespace"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/redis/redisnode"
	"github.com/locklab/locklab/strategies"
)

// benchOptions are bench's flags.
type benchOptions struct {
	names          []string
	rounds, cycles int
	polling        bool
	pollFor, hold  time.Duration
	so             storesOptions
}

func newBenchCmd(g *globals) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure each strategy's uncontended acquire+release cycle next to a PING",
		Long: `bench measures one uncontended acquire+release cycle of each strategy on
real Redis, next to a PING round trip on the same server: the floor. The
contenders are measured in turn, round after round, and the median round
is kept, so the ratios hold on a noisy machine. Multi-node strategies run
on 5 nodes. (For locklab against other Go lock libraries, run make bench.)

With --polling it measures instead what waiting for a held lock costs
Redis: 2, 8 and 32 clients contend for one set-nx-px key, each holding it
for --hold, for --poll-time each, waiting with locklab.Wait's default
policy, with a fixed 5ms loop (Initial = Max = 5ms, the PHP usleep(5000)
loop), and with a Notifier; it prints the Redis commands sent per lock
acquired.

With --stores it compares the locks of the stores named, in one run so
that their ratios hold: Redis's set-nx-px and Redlock on 3 and 5 masters,
etcd-lease on a three-member etcd cluster, pg-lock-table, pg-for-update
and pg-advisory on a throwaway PostgreSQL server, zk-recipe, zk-ephemeral
and zk-golib on a three-server ZooKeeper ensemble, each contender on a
session of its own. For each it prints the
uncontended acquire+release cycle (mean, p50 and p99 of every cycle, the
locks' cycles run one of each in turn), then the locks per second that --contenders
clients take on one key, each waiting with locklab.Wait's default policy
(ZooKeeper's in the lock's own Lock, on a watch, their requests per lock
cycle counted: zk-ephemeral's herd) and releasing at once, and the p50
and p99 of their waits. The rows of a
store whose servers are not installed are skipped, saying why.`,
		Example: `  locklab bench
  locklab bench --strategy set-nx-px,redlock --rounds 7
  locklab bench --polling
  locklab bench --stores redis,etcd,postgres --backend process`,
		Args: usageArgs(0, 0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.runBench(cmd, &o)
		},
	}
	benchFlags(cmd.Flags(), &o)
	return serverCmd(cmd)
}

// benchFlags registers bench's flags on f, bound to o.
func benchFlags(f *pflag.FlagSet, o *benchOptions) {
	f.StringSliceVarP(&o.names, "strategy", "s", nil, "strategies to measure (default: all)")
	intFlag(f, &o.rounds, "rounds", "", 5, atLeast(1), "interleaved rounds (the median is kept; with --stores every round counts)")
	intFlag(f, &o.cycles, "cycles", "", 1000, atLeast(1), "cycles per strategy per round")
	f.BoolVar(&o.polling, "polling", false, "measure the Redis commands per lock of three ways of waiting, with 2, 8 and 32 clients")
	durFlag(f, &o.pollFor, "poll-time", time.Second, durRange{positive: true}, "with --polling: how long each measurement runs")
	durFlag(f, &o.hold, "hold", time.Millisecond, durRange{}, "with --polling: how long each holder keeps the lock")
	f.StringSliceVar(&o.so.stores, "stores", nil, "compare the locks of these stores in one run: "+strings.Join(benchStores, ", "))
	intFlag(f, &o.so.contenders, "contenders", "", 8, atLeast(2), "with --stores: clients contending for one key")
	durFlag(f, &o.so.contendFor, "contend-time", time.Second, durRange{positive: true}, "with --stores: how long each contended row runs per round (longer when its first lock comes later)")
	f.BoolVar(&o.so.asJSON, "json", false, "with --stores: print the comparison as JSON")
}

// runBench checks bench's flags and runs the measurement they choose:
// the stores' comparison (--stores), the cost of waiting (--polling), or
// the Redis strategies' uncontended cycles.
func (g *globals) runBench(cmd *cobra.Command, o *benchOptions) error {
	f := cmd.Flags()
	if err := g.benchModeFlags(cmd, o.polling); err != nil {
		return err
	}
	if f.Changed("stores") {
		switch {
		case f.Changed("strategy"):
			return fmt.Errorf("%s and --stores: choose one (--stores measures its stores' locks)", g.args.spell(cmd, "strategy"))
		case o.polling:
			return fmt.Errorf("--polling and --stores: choose one")
		}
		picked, err := g.checkStores(cmd, o.so.stores)
		if err != nil {
			return err
		}
		o.so.stores, o.so.rounds, o.so.cycles = picked, o.rounds, o.cycles
		return benchStoresRun(cmd, g, o.so)
	}
	if o.so.asJSON {
		return fmt.Errorf("--json prints the comparison of --stores: give --stores too")
	}
	if len(o.names) == 0 {
		for _, n := range strategies.Names() {
			if stores.Of(n) == "" {
				o.names = append(o.names, n)
			}
		}
	}
	if err := g.strategies(cmd, "strategy", o.names); err != nil {
		return err
	}
	for _, n := range o.names {
		if st := stores.Of(n); st != "" {
			return g.args.badFlag(cmd, "strategy", n, "locks on %s, not Redis: measure it with --stores %s", st, st)
		}
	}
	return g.benchRedis(cmd, o)
}

// benchNodes is the Redis servers bench measures on: Redlock runs on the
// first nMulti, a strategy that waits for a replica on the one at
// replicaAt (0: the first, without a replica).
type benchNodes struct {
	nodes             []locklab.ConnSource
	nMulti, replicaAt int
}

// config is the Config of strategy d on the nodes' sources src (nodes
// themselves, or counting wrappers of them).
func (b benchNodes) config(d strategies.Description, src []locklab.ConnSource) locklab.Config {
	switch {
	case d.Properties.MultiNode:
		return locklab.Config{Nodes: src[:b.nMulti]}
	case d.Replica:
		return locklab.Config{Pool: src[b.replicaAt]}
	}
	return locklab.Config{Pool: src[0]}
}

// benchRedis starts the Redis servers of o's strategies and runs
// --polling's measurement on them, or the strategies' cycles.
func (g *globals) benchRedis(cmd *cobra.Command, o *benchOptions) error {
	ctx := cmd.Context()
	// A strategy that waits for a replica (set-nx-px-wait) runs on
	// a master of its own with one, where the backend can start
	// it: the others' figures stay free of replication.
	needReplica := false
	for _, n := range o.names {
		d, _ := strategies.Info(n)
		needReplica = needReplica || d.Replica
	}
	count := 5
	if needReplica && !g.addrsBackend() {
		count = 6
	}
	c, _, err := g.cluster(ctx, io.Discard, count)
	if err != nil {
		return err
	}
	defer closeAndTell(cmd.ErrOrStderr(), c)
	if o.polling {
		return benchPolling(ctx, cmd.OutOrStdout(), c.Describe(), c.Nodes()[0].Pool(), o.pollFor, o.hold)
	}
	var b benchNodes
	for _, n := range c.Nodes() {
		b.nodes = append(b.nodes, n.Pool())
	}
	b.nMulti = len(b.nodes)
	if count == 6 {
		if _, err := c.AddReplica(ctx, c.Nodes()[5]); err != nil {
			return err
		}
		b.nMulti, b.replicaAt = 5, 5
	}
	return g.benchCycles(cmd, o, c, b)
}

// benchCycles measures the uncontended cycle of each of o's strategies on
// b, interleaved with a PING on the cluster's first node, counts the Redis
// commands of one cycle, and prints the table.
func (g *globals) benchCycles(cmd *cobra.Command, o *benchOptions, c *redisnode.Cluster, b benchNodes) (rerr error) {
	ctx := cmd.Context()
	var unacked []string
	entries := []benchutil.Entry{{Name: "PING round trip", F: func() error {
		conn := c.Nodes()[0].Pool().Get()
		defer conn.Close()
		_, err := conn.Do("PING")
		return err
	}}}
	// The keys are a namespace's of their own, deleted at the end:
	// on a server the user runs, bench touches nothing else.
	ns := namespace.New()
	defer func() {
		if err := namespace.SweepAll(ns, b.nodes); err != nil && rerr == nil {
			rerr = err
		}
	}()
	// An acquire that fails unavailable (a Redlock round whose nodes
	// answered too late, a replica that missed WAIT's timeout on a
	// loaded machine) is tried again and counted; the counts are told
	// at the end, the last strategy's first.
	type retries struct {
		name string
		n    *int
	}
	var retried []retries
	defer func() {
		for i := len(retried) - 1; i >= 0; i-- {
			if r := retried[i]; *r.n > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d acquires failed unavailable (too slow an answer) and were tried again\n", r.name, *r.n)
			}
		}
	}()
	cmds := []float64{1}
	var skipped []string
	for _, name := range o.names {
		d, _ := strategies.Info(name)
		l, err := strategies.New(name, b.config(d, b.nodes))
		if err != nil {
			return err
		}
		key := ns.Key("bench:" + name)
		n := new(int)
		f := func() error { return cycleRetry(ctx, l, key, n) }
		retried = append(retried, retries{name, n})
		if d.Replica {
			unacked = append(unacked, name)
			if g.addrsBackend() {
				// On the user's servers: a master without a
				// replica cannot grant it; say so and go on.
				if err := cycle(ctx, l, key); errors.Is(err, locklab.ErrUnavailable) {
					skipped = append(skipped, fmt.Sprintf("%s: skipped: %v (it needs a master with a replica: give its address first)", name, err))
					continue
				}
			}
		}
		entries = append(entries, benchutil.Entry{Name: name, F: f})
		count, err := b.commandsPerCycle(ctx, name, d, key, n)
		if err != nil {
			return err
		}
		cmds = append(cmds, count)
	}
	res, err := benchutil.Interleaved(entries, o.rounds, o.cycles)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Redis: %s; median of %d interleaved rounds of %d cycles\n", c.Describe(), o.rounds, o.cycles)
	if b.replicaAt > 0 {
		fmt.Fprintf(w, "%s on a master of its own with a replica\n", strings.Join(unacked, ", "))
	}
	for _, s := range skipped {
		fmt.Fprintln(w, s)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tcycle\tx PING\tallocs/cycle\tcommands/cycle\t")
	for i, e := range entries {
		fmt.Fprintf(tw, "%s\t%v\t%.2f\t%d\t%.0f\t\n", e.Name, time.Duration(res[i].Ns).Round(100*time.Nanosecond),
			float64(res[i].Ns)/float64(res[0].Ns), res[i].Allocs, cmds[i])
	}
	return tw.Flush()
}

// commandsPerCycle counts the Redis commands of one cycle of strategy
// name (described by d) on key, on counting connections to b's nodes (see
// countedCycle). Tries again are counted in retried.
func (b benchNodes) commandsPerCycle(ctx context.Context, name string, d strategies.Description, key string, retried *int) (float64, error) {
	counted := make([]locklab.ConnSource, len(b.nodes))
	srcs := make([]*counting.Source, len(b.nodes))
	for i, n := range b.nodes {
		srcs[i] = &counting.Source{Src: n}
		counted[i] = srcs[i]
	}
	cl, _ := strategies.New(name, b.config(d, counted))
	commands := func() (sum int64) {
		for _, s := range srcs {
			sum += s.Commands()
		}
		return sum
	}
	c, err := countedCycle(ctx, cl, key, retried, commands)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// countedCycle is the growth of commands over one cycle of l that needed
// no second try, after a first (cycleRetry's) that loads the scripts. A
// try that fails unavailable is counted in retried and tried again, up to
// three times. Every cycle runs on the key cycleRetry's would
// (cycleKey): a failed attempt may have left its key held on the nodes
// that answered late, where the same key would be refused.
func countedCycle(ctx context.Context, l locklab.Locker, key string, retried *int, commands func() int64) (float64, error) {
	if err := cycleRetry(ctx, l, key, retried); err != nil { // loads scripts
		return 0, err
	}
	for try := 0; ; try++ {
		before := commands()
		err := cycle(ctx, l, cycleKey(key, *retried))
		if err == nil {
			return float64(commands() - before), nil
		}
		if !errors.Is(err, locklab.ErrUnavailable) || try == 3 {
			return 0, err
		}
		*retried++
	}
}

// benchModeFlags refuses the flags of one of bench's three measurements
// given to another, which would ignore them: --hold and --poll-time are
// --polling's, --contenders and --contend-time --stores', and --polling
// takes neither --rounds nor --cycles. (--json without --stores, and
// --polling or -s with --stores, are refused with messages of their own.)
func (g *globals) benchModeFlags(cmd *cobra.Command, polling bool) error {
	f := cmd.Flags()
	stores := f.Changed("stores")
	for _, c := range []struct {
		flags []string
		ok    bool
		why   string
	}{
		{[]string{"hold", "poll-time"}, polling, "applies to --polling only"},
		{[]string{"contenders", "contend-time"}, stores, "applies to --stores only"},
		{[]string{"rounds", "cycles"}, !polling, "does not apply to --polling, which runs each row for --poll-time"},
	} {
		for _, name := range c.flags {
			if f.Changed(name) && !c.ok {
				return g.args.badFlag(cmd, name, f.Lookup(name).Value.String(), "%s", c.why)
			}
		}
	}
	return nil
}

// benchPolling prints the Redis commands per lock of each way of waiting
// (benchutil.PollModes) with 2, 8 and 32 clients on one set-nx-px key of a
// namespace of its own, deleted at the end.
func benchPolling(ctx context.Context, w io.Writer, describe string, src locklab.ConnSource, d, hold time.Duration) (rerr error) {
	ns := namespace.New()
	defer func() {
		if err := namespace.SweepAll(ns, []locklab.ConnSource{src}); err != nil && rerr == nil {
			rerr = err
		}
	}()
	fmt.Fprintf(w, "Redis: %s; clients contend for one set-nx-px key, each holding it %v; %v per row\n", describe, hold, d)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\twaiting\tlocks/s\tcommands/lock\t")
	for _, clients := range []int{2, 8, 32} {
		for i, mode := range benchutil.PollModes {
			newLocker := func(s locklab.ConnSource) (locklab.Locker, error) {
				return strategies.New("set-nx-px", locklab.Config{Pool: s, Notify: mode.Notifier})
			}
			key := ns.Key(fmt.Sprintf("poll:%d:%d", clients, i))
			r, err := benchutil.Poll(ctx, src, newLocker, key, mode, clients, hold, d)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.2f\t\n", clients, mode.Name, r.PerSecond(), r.PerLock())
		}
	}
	return tw.Flush()
}

// retryCyclesFor is how long a cycle whose acquire fails unavailable is
// tried again: a loaded machine may stall every node past Redlock's node
// timeout for a while, which passes.
const retryCyclesFor = time.Minute

// cycleRetry is cycle, tried again, with a growing pause, for up to
// retryCyclesFor while the acquire fails unavailable, as it must when its
// servers answer too slowly (a Redlock round past its node timeout, a
// replica missing WAIT's timeout on a loaded machine), or refused: no
// other client locks the key of an uncontended cycle, so a refusal is a
// lock that gave up waiting for its own request (zk-golib's Acquire waits
// a second for zk.Lock, and leaves its node queued); n counts the tries
// again rather than failing the measurement. A failed attempt may leave
// its key held, until its TTL, on the nodes whose answers and releases
// came too late (Redlock's release of a failed round is bounded too),
// where it would refuse the next acquire: once tried again, the cycles
// lock cycleKey(key, *n), a key of their own.
func cycleRetry(ctx context.Context, l locklab.Locker, key string, n *int) error {
	end := time.Now().Add(retryCyclesFor)
	pause := 10 * time.Millisecond
	for {
		err := cycle(ctx, l, cycleKey(key, *n))
		again := errors.Is(err, locklab.ErrUnavailable) || errors.Is(err, locklab.ErrNotAcquired)
		if !again || time.Now().Add(pause).After(end) {
			return err
		}
		*n++
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return err
		}
		pause = min(2*pause, time.Second)
	}
}

// cycleKey is the key of a strategy's cycles once they have been tried
// again n times: key itself at first, then a key of its own after each try
// again, which no failed attempt has touched.
func cycleKey(key string, n int) string {
	if n == 0 {
		return key
	}
	return fmt.Sprintf("%s#%d", key, n)
}

// cycle is one uncontended acquire and release.
func cycle(ctx context.Context, l locklab.Locker, key string) error {
	lease, err := l.Acquire(ctx, key, benchTTL)
	if err != nil {
		return err
	}
	return l.Release(ctx, lease)
}
