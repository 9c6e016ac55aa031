package locklab

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/lockerr"
)

// Watchdog keeps a lease alive while its holder works, as Redisson's watch
// dog does: it extends the lease every interval and, when it cannot, says
// the lock is lost. A holder that does long work checks Lost (or selects on
// it) before each step that needs the lock.
//
// A watchdog does not make a lock safe against pauses: a holder paused past
// its TTL pauses its watchdog too. Fence numbers are what protect the
// resource; the watchdog only keeps healthy holders from losing the lock to
// a TTL that was too short.
type Watchdog struct {
	ext   Extender
	clock Clock
	ttl   time.Duration
	every time.Duration

	mu    sync.Mutex
	lease Lease
	err   error

	lost    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// Watch starts a watchdog for lease, extending it to ttl every interval
// (every <= 0: ttl/3). The ttl has the same minimum as Acquire's (1ms). It
// ends when Stop is called, when ctx ends, or when the lock is lost: an
// extend answers ErrNotHeld, or the lease runs out before an extend gets
// through. Each extend is bounded by the lease's own expiry (Lease.Until,
// judged on the Locker's LeaseClock, so a skewed Config.Clock shifts nothing),
// so Lost fires no later than the expiry plus one interval, whatever the
// server does (paused, partitioned) and whatever the pool's timeouts.
// A Locker that cannot extend (see Extend) is refused with ErrInvalid.
func Watch(ctx context.Context, l Locker, lease Lease, ttl, every time.Duration) (*Watchdog, error) {
	ext, err := extender(l)
	if err != nil {
		return nil, err
	}
	if err := lockerr.CheckLeaseKey(ctx, lease.Key); err != nil {
		return nil, err
	}
	if err := lockerr.CheckTTL(ttl); err != nil {
		return nil, err
	}
	if every <= 0 {
		every = ttl / 3
	}
	if every >= ttl {
		return nil, lockerr.Invalid("watchdog interval %v must be shorter than the ttl %v", every, ttl)
	}
	w := &Watchdog{ext: ext, clock: leaseClock(l), ttl: ttl, every: every, lease: lease,
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run(ctx)
	return w, nil
}

func (w *Watchdog) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTimer(w.every)
	defer t.Stop()
	var lastErr error
	for {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		cur := w.lease
		w.mu.Unlock()
		left := cur.Until.Sub(w.clock.Now())
		if lastErr != nil && left <= 0 {
			w.fail(fmt.Errorf("%w: the lease ran out while extends failed: %w", ErrNotHeld, lastErr))
			return
		}
		// An extend that ends after the lease's expiry is of no use: the
		// lock may belong to someone else by then.
		ectx, cancel := context.WithTimeout(ctx, left)
		next, err := w.ext.Extend(ectx, cur, w.ttl)
		cancel()
		switch {
		case err == nil:
			w.mu.Lock()
			w.lease = next
			w.mu.Unlock()
			lastErr = nil
			t.Reset(w.every)
			continue
		case errors.Is(err, ErrNotHeld):
			w.fail(err)
			return
		case ctx.Err() != nil:
			return
		case !w.clock.Now().Before(cur.Until):
			w.fail(fmt.Errorf("%w: the lease ran out while extends failed: %w", ErrNotHeld, err))
			return
		}
		// Other failures (Redis unreachable) are retried while the
		// lease is still valid, and the loss is told at its expiry at
		// the latest.
		lastErr = err
		t.Reset(min(w.every, cur.Until.Sub(w.clock.Now())))
	}
}

func (w *Watchdog) fail(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	close(w.lost)
}

// Lost is closed when the lock is lost.
func (w *Watchdog) Lost() <-chan struct{} { return w.lost }

// Err says why the lock was lost, or nil while it is held.
func (w *Watchdog) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Lease returns the lease as last extended.
func (w *Watchdog) Lease() Lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lease
}

// Stop ends the renewals and returns the last lease, ready for Release.
func (w *Watchdog) Stop() Lease {
	w.stopped.Do(func() { close(w.stop) })
	<-w.done
	return w.Lease()
}
