package single

import (
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab"
)

// TestHeldTellsTheLastMillisecond: a holder's PTTL of 0 is a lock about to
// expire, told as a millisecond left, so that a waiter retries then; -1 (no
// TTL) and an answer without a PTTL tell nothing.
func TestHeldTellsTheLastMillisecond(t *testing.T) {
	for _, tc := range []struct {
		reply any
		want  time.Duration
	}{
		{[]any{int64(250)}, 250 * time.Millisecond},
		{[]any{int64(0)}, time.Millisecond},
		{[]any{int64(-1)}, 0},
		{nil, 0},
		{[]any{"x"}, 0},
	} {
		h := Held("k", tc.reply)
		if h.Remaining != tc.want || !errors.Is(h, locklab.ErrNotAcquired) {
			t.Errorf("Held(%v): remaining %v (%v), want %v and ErrNotAcquired", tc.reply, h.Remaining, h, tc.want)
		}
	}
}
