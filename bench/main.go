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
	duration = flag.Duration("duration", 3*time.Second, "length of each contended run")
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

	fmt.Printf("\nContended: %d clients, one key, %v each, blocking acquire, empty critical section:\n", *clients, *duration)
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tcycles/s\tp50 wait\tp99 wait\tmax wait\tcmds/cycle\t")
	// The same contenders on connections that count the commands sent.
	all := append(newContenders(counted[:1], countedGos[:1], false), newContenders(counted, countedGos, true)...)
	for _, c := range all {
		r := contended(ctx, c, *clients, *duration)
		fmt.Fprintf(tw, "%s\t%.0f\t%v\t%v\t%v\t%.2f\t\n", c.name, r.perSec, r.p50, r.p99, r.max, r.cmds)
	}
	tw.Flush()
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
		locklabCycler("locklab set-nx-px, Wait", plain, nil),
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
	p := locklab.RetryPolicy{Initial: time.Millisecond, Max: 8 * time.Millisecond}
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
				p := p
				p.Max = ttl
				lease, err = n.Wait(ctx, l, key, ttl, p)
			} else {
				lease, err = locklab.Wait(ctx, l, key, ttl, p)
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
	perSec        float64
	p50, p99, max time.Duration
	cmds          float64
}

// contended runs clients goroutines that acquire one key, release it at
// once, and loop, for d.
func contended(ctx context.Context, c cycler, clients int, d time.Duration) contention {
	key := "bench:contended:" + strings.ReplaceAll(c.name, " ", "_")
	before := sent.Load()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu     sync.Mutex
		waits  []time.Duration
		cycles int64
		wg     sync.WaitGroup
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
			cycles += int64(len(local))
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	after := sent.Load()
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	r := contention{perSec: float64(cycles) / el.Seconds()}
	if n := len(waits); n > 0 {
		r.p50, r.p99, r.max = waits[n/2].Round(time.Microsecond), waits[n*99/100].Round(time.Microsecond), waits[n-1].Round(time.Microsecond)
		r.cmds = float64(after-before) / float64(n)
	}
	return r
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
