package single

import (
	"context"
	"sync"
	"time"

	"github.com/locklab/locklab"
)

// Dogs are the watchdogs of one Locker's held keys, one per key: the
// Config.Watchdog of the strategies that read it. The zero value is ready.
type Dogs struct {
	mu   sync.Mutex
	dogs map[string]*dog
}

// dog is the watchdog of one key, with the cancel that ends its extends.
type dog struct {
	w      *locklab.Watchdog
	cancel context.CancelFunc
}

// Start starts a watchdog that extends lease on l to ttl every interval
// (every <= 0: ttl/3), replacing the key's previous one. With keep, a
// watchdog already watching the key and not lost is kept instead (a
// re-entry). The watchdog outlives ctx, the Acquire's context: it ends at
// Stop, Close, or the loss of the lock.
func (d *Dogs) Start(ctx context.Context, l locklab.Locker, lease locklab.Lease, ttl, every time.Duration, keep bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dogs == nil {
		d.dogs = map[string]*dog{}
	}
	old := d.dogs[lease.Key]
	if old != nil && keep {
		select {
		case <-old.w.Lost():
		default:
			return
		}
	}
	if old != nil {
		old.cancel()
		old.w.Stop()
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := locklab.Watch(wctx, l, lease, ttl, every)
	if err != nil {
		cancel()
		delete(d.dogs, lease.Key)
		return
	}
	d.dogs[lease.Key] = &dog{w: w, cancel: cancel}
}

// Stop ends the watchdog of key, if any, when it watches a lease with
// token ("" : whatever its token): the release of a stale lease leaves
// the watchdog of the key's new lease alone.
func (d *Dogs) Stop(key, token string) {
	d.mu.Lock()
	g := d.dogs[key]
	if g != nil && token != "" && g.w.Lease().Token != token {
		g = nil
	}
	if g != nil {
		delete(d.dogs, key)
	}
	d.mu.Unlock()
	if g != nil {
		g.cancel()
		g.w.Stop()
	}
}

// Get returns the watchdog of key, or nil.
func (d *Dogs) Get(key string) *locklab.Watchdog {
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := d.dogs[key]; g != nil {
		return g.w
	}
	return nil
}

// Close stops every watchdog, as the holder's process ending would; the
// locks then expire at their TTL.
func (d *Dogs) Close() {
	d.mu.Lock()
	dogs := d.dogs
	d.dogs = nil
	d.mu.Unlock()
	for _, g := range dogs {
		g.cancel()
		g.w.Stop()
	}
}
