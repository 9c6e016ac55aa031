package locklab

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Wait's pause follows what a refusal tells of the holder: the backoff
// grows to at most HoldFactor times how long the holder has held the lock,
// never below Initial nor past the holder's remaining TTL, and to Max when
// the refusal says nothing.
func TestWaitDelayFollowsTheHolder(t *testing.T) {
	p := RetryPolicy{Jitter: 1e-9} // the defaults, without jitter to speak of
	const ttl = 10 * time.Second
	held := func(remaining time.Duration) error { return &HeldError{Key: "k", Remaining: remaining} }
	near := func(want, got time.Duration) {
		t.Helper()
		assert.InDelta(t, float64(want), float64(got), float64(time.Microsecond), "want %v, got %v", want, got)
	}

	// No holder information: the backoff, 3ms doubling to 250ms.
	near(3*time.Millisecond, p.waitDelay(1, ttl, ErrNotAcquired))
	near(250*time.Millisecond, p.waitDelay(10, ttl, ErrNotAcquired))

	// A holder that took the lock just now (its PTTL is the whole TTL, to
	// the millisecond): every pause is the floor, however many refusals.
	near(3*time.Millisecond, p.waitDelay(10, ttl, held(ttl)))
	// Held for 2ms so far: up to 32ms.
	near(24*time.Millisecond, p.waitDelay(4, ttl, held(ttl-2*time.Millisecond)))
	near(32*time.Millisecond, p.waitDelay(10, ttl, held(ttl-2*time.Millisecond)))
	// Held for a second: the policy's Max.
	near(250*time.Millisecond, p.waitDelay(10, ttl, held(ttl-time.Second)))
	// A holder that asked for a longer TTL than this waiter says nothing
	// of its age: the policy's Max.
	near(250*time.Millisecond, p.waitDelay(10, ttl, held(2*ttl)))
	// Never past the holder's remaining TTL (and a millisecond).
	near(6*time.Millisecond, p.waitDelay(10, 20*time.Millisecond, held(5*time.Millisecond)))
	// A floor above the cap holds.
	slow := RetryPolicy{Initial: time.Second, Max: time.Second, Jitter: 1e-9}
	near(time.Second, slow.waitDelay(3, ttl, held(ttl)))
}
