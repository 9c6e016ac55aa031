package stress

import (
	"testing"
)

// A stale write sets the register back; a later write based on a read from
// before it puts the register forward again. Lost updates are counted in
// increments lost and never go negative: 2 at the stale write (the two
// increments it overwrote), 1 at the write over it (the stale write's own).
func TestLostUpdatesNeverNegative(t *testing.T) {
	r := newRecorder(Options{NoFence: true})
	stale, _ := r.enter(1, 0) // 0
	b, _ := r.enter(2, 0)     // 0
	r.leave(2, 0, b, true)    // 1
	c, _ := r.enter(3, 0)     // 1
	r.leave(3, 0, c, true)    // 2
	late, _ := r.enter(4, 0)  // reads 2
	r.leave(1, 0, stale, true)
	if r.value != 1 || r.counts[KindLostUpdate] != 2 {
		t.Fatalf("after the stale write: register %d, lost %d; want 1, 2", r.value, r.counts[KindLostUpdate])
	}
	r.leave(4, 0, late, true) // writes 3 over the stale 1
	if r.value != 3 || r.counts[KindLostUpdate] != 3 {
		t.Fatalf("after the write over it: register %d, lost %d; want 3, 3", r.value, r.counts[KindLostUpdate])
	}
}
