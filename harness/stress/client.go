// Goroutine clients: each client slot runs a fresh locker per incarnation,
// over connections whose hook may crash it between two commands.

package stress

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/wrapconn"
	"github.com/locklab/locklab/strategies"
)

// client runs one client slot: a fresh locker per incarnation, replaced
// after each crash.
func (r *recorder) client(ctx context.Context, cancel context.CancelFunc, id int, desc strategies.Description) {
	rng := rand.New(rand.NewPCG(r.o.Seed, uint64(id)))
	nodes := r.o.Nodes
	if r.o.Sentinels != nil {
		// Each client asks the Sentinels on its own, as separate programs
		// would: they move to a new master one by one, not all at once.
		sp, err := r.o.sentinelPool()
		if err != nil {
			r.fail(err)
			return
		}
		defer sp.Close()
		nodes = []locklab.ConnSource{sp}
		sleepCtx(ctx, r.o.stagger(id))
	}
	if r.o.RedisCluster != nil {
		// Each client has a cluster pool of its own, as separate
		// programs would, which finds the new master on its own.
		cp, err := r.o.clusterPool()
		if err != nil {
			r.fail(err)
			return
		}
		defer cp.Close()
		nodes = []locklab.ConnSource{cp}
	}
	for ctx.Err() == nil {
		cr := &crasher{prob: r.o.CrashProb, rng: rng}
		cfg := lockConfig(r.o.TTL)
		var closeStore func()
		if r.store != nil {
			var err error
			if closeStore, err = r.store.Connect(ctx, cr, &cfg); err != nil {
				r.fail(err)
				return
			}
		} else if desc.Properties.MultiNode {
			for _, n := range nodes {
				cfg.Nodes = append(cfg.Nodes, cr.wrap(n))
			}
		} else {
			cfg.Pool = cr.wrap(nodes[0])
		}
		if r.o.Skew > 0 {
			off := time.Duration(rng.Int64N(int64(2*r.o.Skew))) - r.o.Skew
			cfg.Clock = locklab.ClockFunc(func() time.Time { return time.Now().Add(off) })
		}
		l, err := r.o.factory(cfg)
		if err != nil {
			r.addErr(err)
			if closeStore != nil {
				closeStore()
			}
			return
		}
		r.incarnation(ctx, cancel, id, l, cfg.Retry, cr, rng)
		if c, ok := l.(io.Closer); ok {
			// The sessions of the leases it still holds (a crash) end, as
			// the death of its process would end them.
			c.Close()
		}
		if closeStore != nil {
			closeStore()
		}
	}
}

// incarnation loops acquire, critical section, release until the client
// crashes or ctx ends.
func (r *recorder) incarnation(ctx context.Context, cancel context.CancelFunc, id int, l locklab.Locker, p locklab.RetryPolicy, cr *crasher, rng *rand.Rand) {
	for ctx.Err() == nil {
		t0 := time.Now()
		lease, err := locklab.Wait(ctx, l, r.o.Key, r.o.TTL, p)
		if cr.crashed.Load() {
			r.crash(id)
			return
		}
		if err != nil {
			// Wait stops at the run's deadline a moment before ctx says
			// so: that is the run's end, not a failed acquire.
			if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				r.addErr(err)
				time.Sleep(time.Millisecond)
			}
			continue
		}
		r.lastAcquire.Store(int64(r.now()))
		r.critical(ctx, id, lease, time.Since(t0), rng)
		if cr.crashed.Load() {
			r.crash(id)
			return
		}
		l.Release(context.WithoutCancel(ctx), lease)
		if cr.crashed.Load() {
			r.crash(id)
			return
		}
		if n := r.cycles.Add(1); r.o.Cycles > 0 && n >= r.o.Cycles {
			cancel()
		}
	}
}

func (r *recorder) crash(id int) {
	r.crashes.Add(1)
	r.mu.Lock()
	r.event(id, "crashes")
	r.mu.Unlock()
}

// errCrashed is what a crashed client's connection answers (ErrCrashed).
var errCrashed = errors.New("client crashed")

// crasher decides, after each command of one client incarnation, whether the
// client crashes there: a store's connections ask it as a Crasher.
type crasher struct {
	prob    float64
	mu      sync.Mutex
	rng     *rand.Rand
	crashed atomic.Bool
}

// Crashed reports whether the client has crashed.
func (c *crasher) Crashed() bool { return c.crashed.Load() }

// Roll decides whether the client crashes after the command it just sent.
func (c *crasher) Roll() {
	if c.prob <= 0 {
		return
	}
	c.mu.Lock()
	hit := c.rng.Float64() < c.prob
	c.mu.Unlock()
	if hit {
		c.crashed.Store(true)
	}
}

// wrap gives the client's connections to src the crasher's hook: once
// the client has crashed, no connection opens and no command is sent; after
// each command the client may crash.
func (c *crasher) wrap(src locklab.ConnSource) locklab.ConnSource {
	hooks := wrapconn.Hooks{Do: c.do}
	return &wrapconn.Source{Src: src, Open: func(context.Context) (wrapconn.Hooks, error) {
		if c.crashed.Load() {
			return hooks, errCrashed
		}
		return hooks, nil
	}}
}

func (c *crasher) do(ctx context.Context, _ wrapconn.Call, send wrapconn.Send) (any, error) {
	if c.crashed.Load() {
		return nil, errCrashed
	}
	v, err := send(ctx)
	c.Roll()
	return v, err
}
