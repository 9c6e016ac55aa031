package locklab

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Wait's pause follows what a refusal tells of the holder: the backoff
// doubles from the last pause, to at most HoldFactor times how long the
// holder has held the lock, never below Initial nor past the holder's
// remaining TTL, and to Max when the refusal says nothing.
func TestWaitDelayFollowsTheHolder(t *testing.T) {
	const ttl = 10 * time.Second
	held := func(remaining time.Duration) error { return &HeldError{Key: "k", Remaining: remaining} }
	ms := time.Millisecond
	// pauses returns the pauses after the refusals errs, in turn.
	pauses := func(p RetryPolicy, ttl time.Duration, errs ...error) []time.Duration {
		p.Jitter = 1e-9 // without jitter to speak of
		var out []time.Duration
		var last time.Duration
		for _, err := range errs {
			var d time.Duration
			d, last = p.waitDelay(last, ttl, err)
			out = append(out, d.Round(time.Microsecond))
		}
		return out
	}
	times := func(n int, err error) []error {
		var errs []error
		for range n {
			errs = append(errs, err)
		}
		return errs
	}
	p := RetryPolicy{}

	// No holder information: the backoff, 4ms doubling to 250ms.
	assert.Equal(t, []time.Duration{4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 128 * ms, 250 * ms, 250 * ms},
		pauses(p, ttl, times(8, ErrNotAcquired)...))
	// A holder that took the lock just now (its PTTL is the whole TTL, to
	// the millisecond): every pause is the floor, however many refusals.
	assert.Equal(t, []time.Duration{4 * ms, 4 * ms, 4 * ms, 4 * ms, 4 * ms}, pauses(p, ttl, times(5, held(ttl))...))
	// Held for 5ms so far: up to 20ms.
	assert.Equal(t, []time.Duration{4 * ms, 8 * ms, 16 * ms, 20 * ms, 20 * ms},
		pauses(p, ttl, times(5, held(ttl-5*ms))...))
	// After many refusals by a lock that turns over fast, one that finds
	// a holder slowed down doubles the pause, no more.
	got := pauses(p, ttl, append(times(8, held(ttl)), held(ttl-time.Second), held(ttl-time.Second))...)
	assert.Equal(t, []time.Duration{8 * ms, 16 * ms}, got[8:])
	// A holder that asked for a longer TTL than this waiter says nothing
	// of its age: the backoff grows to the policy's Max.
	assert.Equal(t, 250*ms, pauses(p, ttl, times(8, held(2*ttl))...)[7])
	// Never past the holder's remaining TTL (and a millisecond).
	assert.Equal(t, []time.Duration{4 * ms, 6 * ms, 6 * ms}, pauses(p, 20*ms, times(3, held(5*ms))...))
	// A floor above the cap holds.
	slow := RetryPolicy{Initial: time.Second, Max: time.Second}
	assert.Equal(t, []time.Duration{time.Second, time.Second}, pauses(slow, ttl, times(2, held(ttl))...))
}
