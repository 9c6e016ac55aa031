// Command bench compares locklab's locks with the Go libraries people use
// today, on the same redis-server processes in one run: uncontended cycle
// latency and allocations, contended throughput, acquire wait and Redis
// commands per successful cycle. It is its own module so that locklab's
// go.mod does not carry the peers.
//
//	cd bench && go run . [-duration 3s] [-clients 16]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	rsrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"

	"github.com/locklab/locklab"
	adgoredis "github.com/locklab/locklab/adapters/goredis"
	adrueidis "github.com/locklab/locklab/adapters/rueidis"
	"github.com/locklab/locklab/internal/tooling/benchutil"
	"github.com/locklab/locklab/internal/tooling/counting"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/strategies"
)

var (
	duration = flag.Duration("duration", 3*time.Second, "length of each contender's contended runs, all rounds together")
	contends = flag.Int("contend-rounds", 3, "interleaved rounds of contended runs (each -duration/rounds long; pooled)")
	clients  = flag.Int("clients", 16, "clients in the contended runs")
	rounds   = flag.Int("rounds", 5, "interleaved rounds of uncontended measurements (the median is kept)")
	cycles   = flag.Int("cycles", 2000, "uncontended cycles per contender per round")
)

const ttl = 10 * time.Second

// cycler is one contender: a blocking acquire and a release.
type cycler struct {
	name string
	// once makes one uncontended attempt and releases.
	once func(ctx context.Context, key string) error
	// wait blocks until the key is acquired, then returns its release.
	wait func(ctx context.Context, key string) (func(), error)
}

func main() {
	flag.Parse()
	ctx := context.Background()
	var servers []*redisproc.Server
	for i := 0; i < 5; i++ {
		s, err := redisproc.Start(redisproc.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer s.Stop()
		servers = append(servers, s)
	}
	pools := make([]*redis.Pool, 5)
	sources := make([]locklab.ConnSource, 5)
	counted := make([]locklab.ConnSource, 5)
	gos := make([]*goredis.Client, 5)
	countedGos := make([]*goredis.Client, 5)
	for i, s := range servers {
		pools[i] = locklab.NewPool(s.Addr)
		pools[i].MaxIdle = 64
		sources[i] = pools[i]
		counted[i] = &counting.Source{Src: pools[i], Count: &sent}
		gos[i] = goredis.NewClient(&goredis.Options{Addr: s.Addr, PoolSize: 64})
		countedGos[i] = goredis.NewClient(&goredis.Options{Addr: s.Addr, PoolSize: 64})
		countedGos[i].AddHook(countHook{})
	}
	// Dial each pool once before measuring: on a loaded machine a first
	// dial can outlast Redlock's node timeout and fail the first cycle.
	for _, p := range pools {
		c := p.Get()
		c.Do("PING")
		c.Close()
	}
	bin, _ := redisproc.Binary()
	fmt.Printf("machine: %s/%s, %d CPUs, %s; Redis: %s\n\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), redisproc.Version(bin))

	single := newContenders(sources[:1], gos[:1], false)
	multi := newContenders(sources, gos, true)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{servers[0].Addr}, DisableCache: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer rc.Close()
	viaClients := clientContenders(gos[0], rc)

	// Uncontended: contenders measured in interleaved rounds.
	entries := []benchutil.Entry{{Name: "PING round trip (redigo)", F: func() error {
		c := pools[0].Get()
		defer c.Close()
		_, err := c.Do("PING")
		return err
	}}}
	base := []int{0}
	for _, group := range [][]cycler{single, multi} {
		b := len(entries)
		for _, c := range group {
			entries = append(entries, benchutil.Entry{Name: c.name, F: func() error { return c.once(ctx, "bench:uncontended") }})
			base = append(base, b)
		}
	}
	// Through each adapter, next to the peer built on the same client:
	// each pair's "x locklab" is against its own adapter.
	for i, c := range viaClients {
		entries = append(entries, benchutil.Entry{Name: c.name, F: func() error { return c.once(ctx, "bench:uncontended") }})
		base = append(base, len(entries)-1-i%2)
	}
	med, err := benchutil.Interleaved(entries, *rounds, *cycles)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("Uncontended acquire+release cycle (median of %d interleaved rounds of %d cycles):\n", *rounds, *cycles)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tns/cycle\tallocs/cycle\tx PING\tx locklab\t")
	for i, e := range entries {
		vs := ""
		if i > 0 {
			vs = fmt.Sprintf("%.2f", float64(med[i].Ns)/float64(med[base[i]].Ns))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%s\t\n", e.Name, med[i].Ns, med[i].Allocs, float64(med[i].Ns)/float64(med[0].Ns), vs)
	}
	tw.Flush()

	rounds := max(*contends, 1)
	fmt.Printf("\nContended: %d clients, one key, blocking acquire, empty critical section; %d interleaved rounds of %v each, pooled:\n",
		*clients, rounds, *duration/time.Duration(rounds))
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tcycles/s\tp50 wait\tp99 wait\tp99.9 wait\tmax wait\tcmds/cycle\t")
	// The same contenders on connections that count the commands sent.
	single = newContenders(counted[:1], countedGos[:1], false)
	single = append(single, goRedisNotifier(countedGos[0]))
	for _, group := range [][]cycler{single, newContenders(counted, countedGos, true)} {
		for i, r := range contendedRounds(ctx, group, *clients, *duration, rounds) {
			fmt.Fprintf(tw, "%s\t%.0f\t%v\t%v\t%v\t%v\t%.2f\t\n", group[i].name, r.perSec, r.p50, r.p99, r.p999, r.max, r.cmds)
		}
	}
	tw.Flush()
}

// goRedisNotifier is set-nx-px through the go-redis adapter on g, waiting
// with a Notifier that subscribes through go-redis's own pub/sub.
func goRedisNotifier(g *goredis.Client) cycler {
	src := adgoredis.New(g)
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: src, Notify: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return locklabCycler("locklab set-nx-px via go-redis, Notifier", l, locklab.NewNotifier(src))
}

func newContenders(sources []locklab.ConnSource, gos []*goredis.Client, multi bool) []cycler {
	rsPools := make([]rsredis.Pool, len(gos))
	for i, g := range gos {
		rsPools[i] = rsgoredis.NewPool(g)
	}
	rs := redsync.New(rsPools...)
	redsyncC := cycler{
		name: fmt.Sprintf("redsync (%d node%s)", len(gos), plural(len(gos))),
		once: func(ctx context.Context, key string) error {
			m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1))
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			_, err := m.UnlockContext(ctx)
			return err
		},
		wait: func(ctx context.Context, key string) (func(), error) {
			m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1<<30), redsync.WithRetryDelay(time.Millisecond))
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func() { m.UnlockContext(context.Background()) }, nil
		},
	}
	if multi {
		// A node timeout far above a round trip: on a loaded machine the
		// default (a fiftieth of the TTL, capped at 50ms) can lapse and
		// fail a cycle, which would end the run. It bounds a wait, it
		// adds nothing to a cycle whose nodes answer.
		l, err := strategies.New("redlock", locklab.Config{Nodes: sources, NodeTimeout: time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, "redlock:", err)
			os.Exit(1)
		}
		return []cycler{locklabCycler("locklab redlock (5 nodes)", l, nil), redsyncC}
	}
	plain, _ := strategies.New("set-nx-px", locklab.Config{Pool: sources[0]})
	notify, _ := strategies.New("set-nx-px", locklab.Config{Pool: sources[0], Notify: true})
	n := locklab.NewNotifier(sources[0])
	rl := redislock.New(gos[0])
	return []cycler{
		locklabCycler("locklab set-nx-px, Wait (default policy)", plain, nil),
		locklabCycler("locklab set-nx-px, Notifier", notify, n),
		{
			name: "bsm/redislock (1ms linear)",
			once: redislockOnce(rl),
			wait: func(ctx context.Context, key string) (func(), error) {
				l, err := rl.Obtain(ctx, key, ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)})
				if err != nil {
					return nil, err
				}
				return func() { l.Release(context.Background()) }, nil
			},
		},
		redsyncC,
	}
}

// redislockOnce is one uncontended bsm/redislock cycle: Obtain with no
// retry, then Release.
func redislockOnce(rl *redislock.Client) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error {
		l, err := rl.Obtain(ctx, key, ttl, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

// clientContenders are the uncontended cycles through another client:
// locklab's set-nx-px through the go-redis adapter and bsm/redislock (built
// on go-redis), then through the rueidis adapter and redsync's rueidis pool,
// in that order (pairs).
func clientContenders(g *goredis.Client, rc rueidis.Client) []cycler {
	viaGo, err := strategies.New("set-nx-px", locklab.Config{Pool: adgoredis.New(g)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	viaRueidis, err := strategies.New("set-nx-px", locklab.Config{Pool: adrueidis.New(rc)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rl := redislock.New(g)
	rs := redsync.New(rsrueidis.NewPool(rueidiscompat.NewAdapter(rc)))
	return []cycler{
		locklabCycler("locklab set-nx-px via go-redis", viaGo, nil),
		{
			name: "bsm/redislock (go-redis)",
			once: redislockOnce(rl),
		},
		locklabCycler("locklab set-nx-px via rueidis", viaRueidis, nil),
		{
			name: "redsync (rueidis, 1 node)",
			once: func(ctx context.Context, key string) error {
				m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1))
				if err := m.LockContext(ctx); err != nil {
					return err
				}
				_, err := m.UnlockContext(ctx)
				return err
			},
		},
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func locklabCycler(name string, l locklab.Locker, n *locklab.Notifier) cycler {
	// Wait runs with its default policy; a Notifier's waiters sleep until
	// a release (Max: the TTL, its fallback), polling from 1ms only while
	// it has no subscription.
	p := locklab.RetryPolicy{Initial: time.Millisecond, Max: ttl}
	return cycler{
		name: name,
		once: func(ctx context.Context, key string) error {
			lease, err := l.Acquire(ctx, key, ttl)
			if err != nil {
				return err
			}
			return l.Release(ctx, lease)
		},
		wait: func(ctx context.Context, key string) (func(), error) {
			var (
				lease locklab.Lease
				err   error
			)
			if n != nil {
				lease, err = n.Wait(ctx, l, key, ttl, p)
			} else {
				lease, err = locklab.Wait(ctx, l, key, ttl, locklab.RetryPolicy{})
			}
			if err != nil {
				return nil, err
			}
			if n != nil {
				return func() { n.Release(context.Background(), l, lease) }, nil
			}
			return func() { l.Release(context.Background(), lease) }, nil
		},
	}
}

type contention struct {
	perSec              float64
	p50, p99, p999, max time.Duration
	cmds                float64
}

// contendedRounds runs every contender of cs for d in all, in rounds
// rounds of d/rounds, one contender after another, starting one further
// along each round, so that a machine whose load changes weighs on them
// alike; each contender's rounds are pooled. Each round has a key of its
// own: a lock a round ends with cannot hold up the next.
func contendedRounds(ctx context.Context, cs []cycler, clients int, d time.Duration, rounds int) []contention {
	type pooled struct {
		waits []time.Duration
		el    time.Duration
		cmds  int64
	}
	all := make([]pooled, len(cs))
	for r := range rounds {
		for k := range cs {
			i := (k + r) % len(cs)
			key := fmt.Sprintf("bench:contended:%s:%d", strings.ReplaceAll(cs[i].name, " ", "_"), r)
			waits, el, cmds := contended(ctx, cs[i], key, clients, d/time.Duration(rounds))
			all[i].waits = append(all[i].waits, waits...)
			all[i].el += el
			all[i].cmds += cmds
		}
	}
	out := make([]contention, len(cs))
	for i, p := range all {
		w := p.waits
		sort.Slice(w, func(a, b int) bool { return w[a] < w[b] })
		out[i].perSec = float64(len(w)) / p.el.Seconds()
		if n := len(w); n > 0 {
			at := func(q int) time.Duration { return w[min(n*q/1000, n-1)].Round(time.Microsecond) }
			out[i].p50, out[i].p99, out[i].p999, out[i].max = at(500), at(990), at(999), w[n-1].Round(time.Microsecond)
			out[i].cmds = float64(p.cmds) / float64(n)
		}
	}
	return out
}

// contended runs clients goroutines that acquire key, release it at once,
// and loop, for d; it returns every acquire's wait, the time it took and
// the commands sent.
func contended(ctx context.Context, c cycler, key string, clients int, d time.Duration) ([]time.Duration, time.Duration, int64) {
	before := sent.Load()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu    sync.Mutex
		waits []time.Duration
		wg    sync.WaitGroup
	)
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				release, err := c.wait(ctx, key)
				if err != nil {
					continue
				}
				local = append(local, time.Since(t0))
				release()
			}
			mu.Lock()
			waits = append(waits, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return waits, time.Since(start), sent.Load() - before
}

// sent counts the commands the contended runs send: redigo connections
// through counting.Source, go-redis clients through countHook.
var sent atomic.Int64

// countHook counts every command a go-redis client sends, pipelined or not.
type countHook struct{}

func (countHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (countHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		sent.Add(1)
		return next(ctx, cmd)
	}
}

func (countHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		sent.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
