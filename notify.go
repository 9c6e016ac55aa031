package locklab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/locklab/locklab/internal/lockerr"
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
// It keeps one pub/sub connection (PSUBSCRIBE on ReleaseChannelPrefix + "*";
// through the client's own pub/sub API when the source is a Subscriber)
// and, when a release of a key is published, wakes the longest-waiting
// caller of Wait for that key in this process, and only that one: waiters
// are served first come, first served, and a release costs one attempt, not
// a stampede. A waiter also retries when the holder's TTL runs out (a
// crashed holder publishes nothing) and, as a bound on lost notifications,
// after the policy's Max delay.
//
// The connection is checked with a PING every NotifierHealthEvery; when it
// drops or stops answering (server restarted, paused or partitioned, client
// killed), the Notifier reconnects with backoff and subscribes again, and
// wakes every waiter once, since a release may have gone unseen. While it is
// disconnected, waiters poll.
//
// It works with strategies that publish on release: build them with
// Config.Notify set (set-nx-px supports it).
type Notifier struct {
	src ConnSource

	mu      sync.Mutex
	waiters map[string][]*waiter
	started bool
	ready   chan struct{} // closed after the first subscription attempt
	err     error         // why there is no subscription now, or nil
	closed  bool
	quit    chan struct{} // closed by Close
	done    chan struct{} // closed when the listener ends
}

// NotifierHealthEvery is how often a Notifier pings its pub/sub connection.
// A connection that has not answered for three times as long is dropped and
// made again.
const NotifierHealthEvery = time.Second

// notifierBackoff bounds the pause between two reconnection attempts.
const notifierBackoffMax = 2 * time.Second

// NewNotifier returns a Notifier listening on src, the Redis server the
// lock lives on. It connects on first use.
func NewNotifier(src ConnSource) *Notifier {
	return &Notifier{src: src, waiters: map[string][]*waiter{}, ready: make(chan struct{}),
		quit: make(chan struct{}), done: make(chan struct{})}
}

// subscribe starts the listener once and waits for its first attempt to
// subscribe; it returns why there is no subscription now, or nil.
func (n *Notifier) subscribe(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return errNotifierClosed
	}
	if !n.started {
		n.started = true
		go n.listen()
	}
	n.mu.Unlock()
	select {
	case <-n.ready:
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// listen subscribes, serves the subscription until it fails, and subscribes
// again with backoff, until Close.
func (n *Notifier) listen() {
	defer close(n.done)
	first := true
	for failures := 0; ; {
		c, err := n.connect()
		n.mu.Lock()
		n.err = lockerr.Unavailable(err)
		n.mu.Unlock()
		if first {
			close(n.ready)
			first = false
		} else if err == nil {
			n.wakeAll() // a release may have been published while away
		}
		if err == nil {
			failures = 0
			err = n.serve(c)
			n.mu.Lock()
			n.err = lockerr.Unavailable(err)
			n.mu.Unlock()
			n.wakeAll() // they poll until the subscription is back
		} else {
			failures++
		}
		d := min(time.Duration(1<<min(failures, 10))*10*time.Millisecond, notifierBackoffMax)
		select {
		case <-n.quit:
			return
		case <-time.After(d):
		}
	}
}

// Subscriber is a ConnSource whose client has a pub/sub API of its own
// (the go-redis and rueidis adapters' Sources): a Notifier on one
// subscribes through that API rather than on a redigo connection.
type Subscriber interface {
	// PSubscribe subscribes to the channels that match pattern on a
	// connection of its own, and returns once the server confirmed it.
	PSubscribe(ctx context.Context, pattern string) (Subscription, error)
}

// Subscription is a pattern subscription a Subscriber made: Receive is
// called by one goroutine, Ping and Close by another.
type Subscription interface {
	// Receive waits at most timeout for the next message or reply on the
	// subscription and returns the channel of a message, or "" for a
	// reply that is not one (a PING's). An error (the timeout, the
	// connection lost, Close) ends the subscription.
	Receive(timeout time.Duration) (channel string, err error)
	// Ping sends a PING, whose reply Receive sees.
	Ping() error
	// Close ends the subscription and gives its connection back; a
	// Receive under way returns an error. It may be called more than once.
	Close() error
}

// connect subscribes, through the source's own pub/sub API when it has
// one; the subscription is confirmed within a few seconds or given up.
func (n *Notifier) connect() (Subscription, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-n.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	if s, ok := n.src.(Subscriber); ok {
		return s.PSubscribe(ctx, ReleaseChannelPrefix+"*")
	}
	c, err := n.src.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	psc := redis.PubSubConn{Conn: c}
	if err := psc.PSubscribe(ReleaseChannelPrefix + "*"); err != nil {
		c.Close()
		return nil, err
	}
	// The first reply confirms the subscription.
	v := psc.ReceiveWithTimeout(5 * time.Second)
	if _, ok := v.(redis.Subscription); ok {
		return &redigoSub{psc: psc}, nil
	}
	c.Close()
	if err, ok := v.(error); ok {
		return nil, err
	}
	return nil, fmt.Errorf("unexpected reply %v to PSUBSCRIBE", v)
}

// redigoSub is a subscription on a redigo connection. Only the pinger
// writes (a PING, or the PUNSUBSCRIBE of unsubscribe) and only the reader
// reads and, when it ends, closes the connection.
type redigoSub struct {
	psc  redis.PubSubConn
	wmu  sync.Mutex // the pinger's writes and the reader's Close
	done bool
}

func (s *redigoSub) Receive(timeout time.Duration) (string, error) {
	switch v := s.psc.ReceiveWithTimeout(timeout).(type) {
	case redis.Message:
		return v.Channel, nil
	case redis.Subscription:
		if v.Count == 0 {
			return "", errNotifierClosed // unsubscribe asked for it
		}
	case error:
		return "", v
	}
	return "", nil
}

func (s *redigoSub) Ping() error { return s.locked(func() error { return s.psc.Ping("") }) }

// unsubscribe asks the server to end the subscription: the reader sees
// its end, and the connection goes back to its pool clean.
func (s *redigoSub) unsubscribe() { s.locked(func() error { return s.psc.PUnsubscribe() }) }

func (s *redigoSub) Close() error {
	return s.locked(func() error { s.done = true; return s.psc.Conn.Close() })
}

// locked runs f under wmu, unless the connection is closed.
func (s *redigoSub) locked(f func() error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.done {
		return errNotifierClosed
	}
	return f()
}

// serve reads messages from sub, pinging it every NotifierHealthEvery,
// until it fails, stops answering, or Close ends it. After Close, serve
// waits for the reader only a moment (one stuck ends at its read timeout).
func (n *Notifier) serve(sub Subscription) error {
	end := make(chan error, 1)
	stopPing := make(chan struct{})
	go func() {
		t := time.NewTicker(NotifierHealthEvery)
		defer t.Stop()
		for {
			select {
			case <-stopPing:
				return
			case <-n.quit:
				if u, ok := sub.(interface{ unsubscribe() }); ok {
					u.unsubscribe()
				} else {
					sub.Close()
				}
				return
			case <-t.C:
				if sub.Ping() != nil {
					return // the reader sees it too
				}
			}
		}
	}()
	go func() {
		var err error
		defer func() {
			close(stopPing)
			sub.Close()
			end <- err
		}()
		for err == nil {
			var ch string
			if ch, err = sub.Receive(3 * NotifierHealthEvery); ch != "" {
				n.wake(strings.TrimPrefix(ch, ReleaseChannelPrefix))
			}
		}
	}()
	select {
	case err := <-end:
		return err
	case <-n.quit:
		select {
		case <-end:
		case <-time.After(closeGrace):
		}
		return errNotifierClosed
	}
}

var errNotifierClosed = errors.New("locklab: notifier closed")

// subscribed reports whether the subscription is up now.
func (n *Notifier) subscribed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err == nil && !n.closed
}

// closeGrace is how long Close waits for the server to end the
// subscription before it leaves the connection to its read timeout.
const closeGrace = 200 * time.Millisecond

// wakeAll wakes one waiter of every key, to try again.
func (n *Notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key := range n.waiters {
		n.wakeLocked(key)
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
// locklab.Wait: at once on an error Wait does not retry (IsRetryable is
// false: anything but a refusal or a failure marked lockkit.Retryable), with
// ctx.Err() and the last refusal when ctx ends. Without a subscription (Redis
// unreachable, or the subscription dropped and not yet back) it polls like
// locklab.Wait, and goes back to notifications as soon as the subscription
// is back. After Close it is locklab.Wait.
func (n *Notifier) Wait(ctx context.Context, l Locker, key string, ttl time.Duration, p RetryPolicy) (Lease, error) {
	if ctx != nil && errors.Is(n.subscribe(ctx), errNotifierClosed) {
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

func (ls *listener) pause(ctx context.Context, n int, err error) (*Lease, bool) {
	d := ls.p.Max // a release wakes it before that
	if !ls.n.subscribed() {
		// No release will be heard: poll. The reconnection wakes every
		// waiter, so the next pause waits for notifications again.
		d = ls.p.Delay(max(n, 1))
	}
	lease, ok := sleep(ctx, &ls.timer, untilExpiry(d, err), ls.w.wake, ls.w.given)
	if lease != nil {
		ls.n.mu.Lock()
		ls.w.claimed = false // the handoff is complete
		ls.n.mu.Unlock()
	}
	return lease, ok
}

// Close ends the subscription. Waiters fall back to polling. It returns
// promptly whatever the server does: when the server does not answer the
// unsubscribe within a moment (paused, partitioned), the connection is left
// to its read timeout, which closes it.
func (n *Notifier) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	started := n.started
	n.mu.Unlock()
	close(n.quit)
	if started {
		select {
		case <-n.done:
		case <-time.After(2 * closeGrace):
			// Still dialling or confirming a subscription with a server
			// that does not answer: the listener ends when that times
			// out, and it sees quit.
		}
	}
	return nil
}
