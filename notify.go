package locklab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// ReleaseChannelPrefix starts the name of the channel on which strategies
// built with Config.Notify publish a release of key: ReleaseChannelPrefix +
// key.
const ReleaseChannelPrefix = "locklab:released:"

// HeldError is the refusal of a strategy that knows how long the current
// holder's lock has left. It wraps ErrNotAcquired.
type HeldError struct {
	Key string
	// Remaining is the holder's remaining TTL; 0 when the key has none.
	Remaining time.Duration
}

func (e *HeldError) Error() string {
	if e.Remaining > 0 {
		return fmt.Sprintf("%v: %q (expires in %v)", ErrNotAcquired, e.Key, e.Remaining)
	}
	return fmt.Sprintf("%v: %q", ErrNotAcquired, e.Key)
}

// Unwrap returns ErrNotAcquired.
func (e *HeldError) Unwrap() error { return ErrNotAcquired }

// remaining returns the holder's remaining TTL that err reports, or 0.
func remaining(err error) time.Duration {
	var he *HeldError
	if errors.As(err, &he) {
		return he.Remaining
	}
	return 0
}

// Notifier is a blocking acquire that wakes on release instead of polling.
// It keeps one pub/sub connection (PSUBSCRIBE on ReleaseChannelPrefix + "*")
// and, when a release of a key is published, wakes the longest-waiting
// caller of Wait for that key in this process, and only that one: waiters
// are served first come, first served, and a release costs one attempt, not
// a stampede. A waiter also retries when the holder's TTL runs out (a
// crashed holder publishes nothing) and, as a bound on lost notifications,
// after the policy's Max delay.
//
// It works with strategies that publish on release: build them with
// Config.Notify set (set-nx-px supports it).
type Notifier struct {
	src ConnSource

	mu      sync.Mutex
	waiters map[string][]*waiter
	started bool
	ready   chan struct{}
	err     error
	conn    redis.Conn
	wmu     sync.Mutex // serializes writes on conn: Close's and the listener's
	closed  bool
	done    chan struct{}
}

// NewNotifier returns a Notifier listening on src, the Redis server the
// lock lives on. It connects on first use.
func NewNotifier(src ConnSource) *Notifier {
	return &Notifier{src: src, waiters: map[string][]*waiter{}, ready: make(chan struct{}), done: make(chan struct{})}
}

// subscribe subscribes once and waits for the subscription to be confirmed.
func (n *Notifier) subscribe(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return errors.New("locklab: notifier closed")
	}
	if !n.started {
		n.started = true
		go n.listen()
	}
	n.mu.Unlock()
	select {
	case <-n.ready:
		return n.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *Notifier) listen() {
	defer close(n.done)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	c, err := n.src.GetContext(ctx)
	cancel()
	if err == nil {
		err = c.Send("PSUBSCRIBE", ReleaseChannelPrefix+"*")
		if err == nil {
			err = c.Flush()
		}
	}
	psc := redis.PubSubConn{Conn: c}
	if err == nil {
		// The first reply confirms the subscription.
		switch v := psc.ReceiveWithTimeout(5 * time.Second).(type) {
		case redis.Subscription:
		case error:
			err = v
		}
	}
	n.mu.Lock()
	n.err, n.conn = Unavailable(err), c
	n.mu.Unlock()
	close(n.ready)
	if err != nil {
		if c != nil {
			c.Close()
		}
		return
	}
	defer func() {
		n.wmu.Lock()
		c.Close()
		n.wmu.Unlock()
	}()
	for {
		switch v := psc.ReceiveWithTimeout(0).(type) {
		case redis.Message:
			n.wake(strings.TrimPrefix(v.Channel, ReleaseChannelPrefix))
		case redis.Subscription:
			if v.Count == 0 {
				return // Close asked for it
			}
		case error:
			n.mu.Lock()
			n.err = Unavailable(v)
			// Wake everyone: they fall back to polling.
			for _, ws := range n.waiters {
				for _, w := range ws {
					signal(w.wake)
				}
			}
			n.mu.Unlock()
			return
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// waiter is one caller of Notifier.Wait, in a key's queue.
type waiter struct {
	ttl time.Duration
	// wake: a release was published (buffered, one pending at most).
	wake chan struct{}
	// given: a holder handed the lock over (buffered).
	given chan Lease
	// claimed (guarded by Notifier.mu): a handoff to this waiter is under
	// way; it is no longer in the queue.
	claimed bool
}

// wakeable reports whether w can take a wake-up; the caller holds n.mu.
func (w *waiter) wakeable() bool { return len(w.wake) == 0 && !w.claimed }

// wake signals the longest-waiting waiter for key that has no wake-up
// pending: two releases in a row wake two waiters, not one twice.
func (n *Notifier) wake(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wakeLocked(key)
}

func (n *Notifier) wakeLocked(key string) {
	for _, w := range n.waiters[key] {
		if w.wakeable() {
			signal(w.wake)
			return
		}
	}
}

// enqueue adds w to key's queue and reports whether others were there.
func (n *Notifier) enqueue(key string, w *waiter) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.waiters[key] = append(n.waiters[key], w)
	return len(n.waiters[key]) > 1
}

// remove takes w out of key's queue; the caller holds n.mu.
func (n *Notifier) removeLocked(key string, w *waiter) {
	ws := n.waiters[key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(n.waiters, key)
	} else {
		n.waiters[key] = ws
	}
}

// dequeue removes w from key's queue. A wake-up w received but did not use
// goes to the next waiter.
func (n *Notifier) dequeue(key string, w *waiter) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.removeLocked(key, w)
	select {
	case <-w.wake:
		n.wakeLocked(key)
	default:
	}
}

// Wait acquires key with l, sleeping between attempts until a release of
// key is published, the lock is handed over by a holder in this process
// (see Release), the holder's TTL runs out, or p's Max delay passes. When
// other callers in this process already wait for key, Wait queues behind
// them without a first attempt: waiters are served in order. It returns like
// locklab.Wait: at once on errors other than ErrNotAcquired, with ctx.Err()
// and the last refusal when ctx ends. Without a subscription (Redis
// unreachable) it polls like locklab.Wait.
func (n *Notifier) Wait(ctx context.Context, l Locker, key string, ttl time.Duration, p RetryPolicy) (Lease, error) {
	if ctx != nil && n.subscribe(ctx) != nil {
		return Wait(ctx, l, key, ttl, p)
	}
	return waitLoop(ctx, l, key, ttl, p, &listener{n: n, l: l, p: p.withDefaults(),
		w: &waiter{ttl: ttl, wake: make(chan struct{}, 1), given: make(chan Lease, 1)}})
}

// Release gives lease back. When l can hand a lock over (a Handoffer, such
// as set-nx-px) and a caller of Wait in this process is waiting for the key,
// the lock goes straight to the longest-waiting one in a single atomic
// command: the key never falls free, and no newcomer can barge in between.
// Otherwise it is l.Release.
func (n *Notifier) Release(ctx context.Context, l Locker, lease Lease) error {
	h, ok := l.(Handoffer)
	if !ok {
		return l.Release(ctx, lease)
	}
	n.mu.Lock()
	var w *waiter
	for _, x := range n.waiters[lease.Key] {
		if !x.claimed {
			w = x
			break
		}
	}
	if w != nil {
		w.claimed = true
		n.removeLocked(lease.Key, w)
	}
	n.mu.Unlock()
	if w == nil {
		return l.Release(ctx, lease)
	}
	next, err := h.Handoff(ctx, lease, w.ttl)
	if err == nil {
		w.given <- next
		return nil
	}
	// No handoff: back to the head of the queue, awake, to try on its own.
	n.mu.Lock()
	w.claimed = false
	n.waiters[lease.Key] = append([]*waiter{w}, n.waiters[lease.Key]...)
	signal(w.wake)
	n.mu.Unlock()
	return err
}

// listener waits for a release notification or a handoff. It is queued from
// before the first attempt until the wait ends, so that a release right
// after a refusal is not missed and the waiter keeps its place across
// attempts.
type listener struct {
	n     *Notifier
	l     Locker
	p     RetryPolicy
	w     *waiter
	key   string
	timer *time.Timer
}

func (ls *listener) start(key string) bool {
	ls.key = key
	return ls.n.enqueue(key, ls.w)
}

func (ls *listener) done(acquired bool) {
	if acquired {
		select { // a wake-up for a release before this win is stale
		case <-ls.w.wake:
		default:
		}
	}
	ls.n.mu.Lock()
	claimed := ls.w.claimed
	ls.n.mu.Unlock()
	if !claimed {
		ls.n.dequeue(ls.key, ls.w)
		return
	}
	// A holder is handing the lock over right now (while this waiter won
	// on its own or gave up): take the handed lease and give it back, or
	// the key would stay locked until its TTL.
	select {
	case lease := <-ls.w.given:
		ls.l.Release(context.Background(), lease)
	case <-ls.w.wake: // the handoff failed
		ls.n.dequeue(ls.key, ls.w)
	}
}

func (ls *listener) pause(ctx context.Context, _ int, err error) (*Lease, bool) {
	lease, ok := sleep(ctx, &ls.timer, untilExpiry(ls.p.Max, err), ls.w.wake, ls.w.given)
	if lease != nil {
		ls.n.mu.Lock()
		ls.w.claimed = false // the handoff is complete
		ls.n.mu.Unlock()
	}
	return lease, ok
}

// Close ends the subscription. Waiters fall back to polling.
func (n *Notifier) Close() error {
	n.mu.Lock()
	n.closed = true
	c, started := n.conn, n.started
	n.mu.Unlock()
	if !started {
		return nil
	}
	<-n.ready
	if c != nil && n.err == nil {
		// The listener owns the connection: ask the server to end the
		// subscription and let the listener close it.
		n.wmu.Lock()
		c.Send("PUNSUBSCRIBE")
		c.Flush()
		n.wmu.Unlock()
	}
	<-n.done
	return nil
}
