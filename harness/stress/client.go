// Goroutine clients: each client slot runs a fresh locker per incarnation,
// over the store's connections, whose hook may crash it between two
// requests.

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
)

// client runs one client slot: a fresh locker per incarnation, replaced
// after each crash.
func (r *recorder) client(ctx context.Context, cancel context.CancelFunc, id int) {
	rng := rand.New(rand.NewPCG(r.o.Seed, uint64(id)))
	for ctx.Err() == nil {
		cr := &crasher{prob: r.o.CrashProb, rng: rng}
		cfg := lockConfig(r.o.TTL)
		closeStore, err := r.store.Connect(ctx, id, cr, &cfg)
		if err != nil {
			r.fail(err)
			return
		}
		if r.o.Skew > 0 {
			off := time.Duration(rng.Int64N(int64(2*r.o.Skew))) - r.o.Skew
			cfg.Clock = locklab.ClockFunc(func() time.Time { return time.Now().Add(off) })
		}
		l, err := r.o.factory(cfg)
		if err != nil {
			r.addErr(err)
			closeStore()
			return
		}
		r.incarnation(ctx, cancel, id, l, cfg.Retry, cr, rng)
		if c, ok := l.(io.Closer); ok {
			// The sessions of the leases it still holds (a crash) end, as
			// the death of its process would end them.
			c.Close()
		}
		closeStore()
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
