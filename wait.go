package locklab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/locklab/locklab/internal/lockerr"
)

// RetryPolicy says how Wait spaces its attempts: exponential backoff from
// Initial, capped at Max, each delay shortened at random by up to Jitter (a
// fraction in [0, 1]) so that waiters do not retry in lockstep. Attempts, when
// positive, bounds the number of attempts. The zero value means: 4ms first
// delay, 250ms cap, factor 2, jitter 0.5, attempts until ctx is done.
//
// Wait caps the backoff by what a refusal tells of the holder (a
// *HeldError, as set-nx-px's): never past the holder's remaining TTL, and
// never growing past HoldFactor times how long the holder has held the
// lock so far (the TTL Wait asks for minus the holder's remaining TTL,
// which assumes the holder asked for the same TTL), nor below Initial;
// each pause grows from the one before, not from the number of refusals. A
// lock that changes hands every few hundred microseconds keeps its
// waiters trying every Initial or so, however often they were refused;
// one held for Max/HoldFactor (62.5ms by default) or longer lets them back
// off to Max.
type RetryPolicy struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
	Jitter     float64
	Attempts   int
}

// Validate refuses a policy no delay can be computed from: a Multiplier or
// Jitter that is NaN, or a negative Initial, Max or Attempts. Out-of-range
// values that have a meaning (Multiplier below 1, Jitter outside [0, 1])
// pick the defaults, as the zero value does.
func (p RetryPolicy) Validate() error {
	switch {
	case math.IsNaN(p.Multiplier):
		return lockerr.Invalid("retry policy: Multiplier is NaN")
	case math.IsNaN(p.Jitter):
		return lockerr.Invalid("retry policy: Jitter is NaN")
	case p.Initial < 0:
		return lockerr.Invalid("retry policy: negative Initial %v", p.Initial)
	case p.Max < 0:
		return lockerr.Invalid("retry policy: negative Max %v", p.Max)
	case p.Attempts < 0:
		return lockerr.Invalid("retry policy: negative Attempts %d", p.Attempts)
	}
	return nil
}

// HoldFactor bounds Wait's backoff after a refusal that tells the holder's
// remaining TTL: at most HoldFactor times how long the holder has held the
// lock (see RetryPolicy).
const HoldFactor = 4

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Initial <= 0 {
		p.Initial = 4 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 250 * time.Millisecond
	}
	if p.Max < p.Initial {
		p.Max = p.Initial
	}
	if p.Multiplier < 1 {
		p.Multiplier = 2
	}
	if p.Jitter <= 0 || p.Jitter > 1 {
		p.Jitter = 0.5
	}
	return p
}

// Delay returns the pause before attempt n+1, after n failed attempts
// (n >= 1), with jitter applied.
func (p RetryPolicy) Delay(n int) time.Duration {
	p = p.withDefaults()
	d := float64(p.Initial)
	for i := 1; i < n && d < float64(p.Max); i++ {
		d *= p.Multiplier
	}
	d = min(d, float64(p.Max))
	d -= d * p.Jitter * rand.Float64()
	return time.Duration(d)
}

// Wait acquires key with l, retrying according to p after each attempt that
// was refused (ErrNotAcquired) or that failed with an error marked
// lockkit.Retryable, until it succeeds, the attempts run out, or ctx is done. A
// strategy marks the failures its algorithm says to try again: Redlock marks
// every round that failed without being refused, such as one where too few
// nodes answered in time (see the redlock package). Any other error (the
// store unreachable on a single-node strategy, bad input, a policy Validate
// refuses) is returned at once.
//
// When ctx ends the wait, the error wraps ctx.Err() and the outcome of the
// last attempt: errors.Is finds ErrNotAcquired when the lock was held by
// someone else, ErrUnavailable when the last attempt failed otherwise. An
// attempt that ctx cut short is not an outcome: the one before it is
// reported, if there was one. When the attempts run out, the error wraps
// the last attempt's. When a refusal says when the holder's lock expires (a
// *HeldError), Wait sleeps no longer than that.
func Wait(ctx context.Context, l Locker, key string, ttl time.Duration, p RetryPolicy) (Lease, error) {
	return waitLoop(ctx, l, key, ttl, p, &poller{p: p, ttl: ttl})
}

// RetryableError marks a failed attempt that is worth another one after a
// delay although it was not refused: Wait and Notifier.Wait retry it as they
// retry ErrNotAcquired. Err keeps its own sentinel
// (ErrUnavailable for a failed round); errors.Is and errors.As see through
// the mark, and its text is Err's.
type RetryableError struct {
	Err error
}

// Error returns Err's text.
func (e *RetryableError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RetryableError) Unwrap() error { return e.Err }

// IsRetryable reports whether Wait retries after err: a refusal
// (ErrNotAcquired) or a failure marked lockkit.Retryable. Bad input (ErrInvalid) is
// never retried, whatever marks it.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, ErrInvalid) {
		return false
	}
	var re *RetryableError
	return errors.Is(err, ErrNotAcquired) || errors.As(err, &re)
}

// pauser is how a wait loop spends the time between two attempts.
type pauser interface {
	// start runs once, before the first attempt; true means: pause before
	// the first attempt too.
	start(key string) bool
	// pause waits after the n-th refusal, err (nil before a first attempt).
	// It returns a lease when the lock was handed over meanwhile, and
	// false when ctx ended.
	pause(ctx context.Context, n int, err error) (*Lease, bool)
	// done runs once, when the loop returns; acquired tells how.
	done(acquired bool)
}

// waitLoop is the retry loop of Wait and Notifier.Wait.
func waitLoop(ctx context.Context, l Locker, key string, ttl time.Duration, p RetryPolicy, pz pauser) (Lease, error) {
	if l == nil {
		return Lease{}, lockerr.Invalid("nil Locker")
	}
	if err := lockerr.CheckAcquire(ctx, key, ttl); err != nil {
		return Lease{}, err
	}
	if err := p.Validate(); err != nil {
		return Lease{}, err
	}
	acquired := false
	defer func() { pz.done(acquired) }()
	var last error // the outcome of the last attempt that ctx did not cut short
	stopped := func(cause, err error) error {
		switch {
		case errors.Is(err, ErrNotAcquired):
			last = err // refused, whatever ended ctx meanwhile
		case last == nil && err != nil:
			last = err
		case last == nil:
			last = ErrNotAcquired // no attempt yet: queued behind other waiters
		}
		return fmt.Errorf("locklab: stopped waiting for %q: %w (last attempt: %w)", key, cause, last)
	}
	if pz.start(key) {
		handed, ok := pz.pause(ctx, 0, nil)
		if !ok {
			return Lease{}, stopped(ctx.Err(), nil)
		}
		if handed != nil {
			acquired = true
			return *handed, nil
		}
	}
	for n := 1; ; n++ {
		lease, err := l.Acquire(ctx, key, ttl)
		if err == nil {
			acquired = true
			return lease, nil
		}
		if cause := ctxEnded(ctx); cause != nil {
			return Lease{}, stopped(cause, err)
		}
		if !IsRetryable(err) {
			return Lease{}, err
		}
		last = err
		if p.Attempts > 0 && n >= p.Attempts {
			return Lease{}, fmt.Errorf("locklab: gave up on %q after %d attempts: %w", key, n, err)
		}
		handed, ok := pz.pause(ctx, n, err)
		if !ok {
			return Lease{}, stopped(ctx.Err(), nil)
		}
		if handed != nil {
			acquired = true
			return *handed, nil
		}
	}
}

// poller sleeps the policy's backoff delay, capped by what the refusal
// tells of the holder (waitDelay).
type poller struct {
	p     RetryPolicy
	ttl   time.Duration
	last  time.Duration // the last pause, before jitter
	timer *time.Timer
}

func (*poller) start(string) bool { return false }

func (*poller) done(bool) {}

func (pl *poller) pause(ctx context.Context, n int, err error) (*Lease, bool) {
	var d time.Duration
	d, pl.last = pl.p.waitDelay(pl.last, pl.ttl, err)
	return sleep(ctx, &pl.timer, d, nil, nil)
}

// waitDelay is Wait's pause after a refusal err of an acquire for ttl,
// last the pause before it (0 after the first refusal): the backoff grows
// from last (Initial first) by Multiplier, at most to Max and to
// HoldFactor times how long the holder has held the lock (ttl minus its
// remaining TTL, when err tells it), never below Initial, and never past
// the holder's remaining TTL. It returns the pause, jittered, and the
// pause before jitter, the next call's last. Growing from the last pause
// rather than from the number of refusals, a waiter that met a lock
// turning over fast many times does not leap to Max at the first refusal
// that finds a holder slowed down (on a loaded machine, descheduled).
func (p RetryPolicy) waitDelay(last, ttl time.Duration, err error) (time.Duration, time.Duration) {
	p = p.withDefaults()
	if r := remaining(err); r > 0 && r <= ttl {
		p.Max = max(p.Initial, min(p.Max, HoldFactor*(ttl-r)))
	}
	d := p.Initial
	if last > 0 {
		d = time.Duration(min(float64(last)*p.Multiplier, float64(p.Max)))
	}
	d = max(p.Initial, min(d, p.Max))
	j := d - time.Duration(float64(d)*p.Jitter*rand.Float64())
	return untilExpiry(j, err), d
}

// untilExpiry caps the pause d at the holder's remaining TTL (plus a
// millisecond) when the refusal err tells it: no point waiting longer.
func untilExpiry(d time.Duration, err error) time.Duration {
	if r := remaining(err); r > 0 {
		d = min(d, r+time.Millisecond)
	}
	return d
}

// sleep waits d on *timer (created on first use), or until wake receives,
// or until given hands a lease over, which it returns; false when ctx ends
// first.
func sleep(ctx context.Context, timer **time.Timer, d time.Duration, wake <-chan struct{}, given <-chan Lease) (*Lease, bool) {
	if *timer == nil {
		*timer = time.NewTimer(d)
	} else {
		(*timer).Reset(d)
	}
	select {
	case <-ctx.Done():
		(*timer).Stop()
		return nil, false
	case lease := <-given:
		(*timer).Stop()
		return &lease, true
	case <-wake:
		(*timer).Stop()
		return nil, true
	case <-(*timer).C:
		return nil, true
	}
}

// ctxEnded returns ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed: a connection's read deadline, set from ctx, can fire a moment
// before ctx reports itself done.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
