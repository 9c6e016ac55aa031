// The register: the shared resource of the critical section, read and
// written under one mutex, with the fence check and the overlap and
// lost-update checkers.

package stress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/locklab/locklab"
)

// critical is the critical section: read the register, wait, write it back
// plus one, with the lease's fence on both accesses. The wait, a pause
// included, ends early when ctx does (the run's end, Ctrl-C): the holder
// then writes at once, as a paused process woken at the end would.
func (r *recorder) critical(ctx context.Context, id int, lease locklab.Lease, waited time.Duration, rng *rand.Rand) {
	r.mu.Lock()
	r.latency = append(r.latency, waited)
	r.event(id, fmt.Sprintf("acquires (fence %d)", lease.Fence))
	r.mu.Unlock()
	v, ok := r.enter(id, lease.Fence)

	hold := time.Duration(rng.Int64N(int64(r.o.HoldMax) + 1))
	if r.o.PauseProb > 0 && rng.Float64() < r.o.PauseProb {
		r.pauses.Add(1)
		r.mu.Lock()
		r.event(id, fmt.Sprintf("pauses %v inside the critical section", r.o.PauseFor))
		r.mu.Unlock()
		hold += r.o.PauseFor
	}
	t := time.NewTimer(hold)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	r.leave(id, lease.Fence, v, ok)
}

// enter is the first access of a critical section: the client is inside
// from now on, overlapping any client already inside, and reads the
// register. It returns the value read and whether the fence let it through.
func (r *recorder) enter(id int, fence int64) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.inside) > 0 {
		others := make([]int, 0, len(r.inside))
		for c := range r.inside {
			others = append(others, c)
		}
		sort.Ints(others)
		r.overlaps++
		r.violateLocked(KindOverlap, 1, fmt.Sprintf("client %d entered while clients %v were inside", id, others))
	}
	r.inside[id] = r.now()
	v, ok := r.access(fence)
	r.opEnter(id, fence, v, ok)
	if ok {
		r.event(id, fmt.Sprintf("reads %d", v))
	} else {
		r.event(id, "read refused by fence")
	}
	return v, ok
}

// leave is the last access of a critical section: the client writes v+1,
// where v is what it read (readOK false if the fence refused that read), and
// is no longer inside. It reports whether the write was accepted.
func (r *recorder) leave(id int, fence, v int64, readOK bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inside, id)
	_, wok := r.access(fence)
	r.opLeave(id, readOK && wok)
	if readOK && wok {
		switch {
		case r.value > v:
			lost := r.value - v
			r.violateLocked(KindLostUpdate, lost, fmt.Sprintf("client %d read %d and wrote %d, but the register held %d by then: %d increment(s) lost", id, v, v+1, r.value, lost))
		case r.value < v:
			// A stale write set the register back after this client read
			// it (that write's loss was counted then); this write puts it
			// forward again and loses the stale write's own increment.
			r.violateLocked(KindLostUpdate, 1, fmt.Sprintf("client %d read %d and wrote %d, over the %d a stale write had set back: 1 increment lost", id, v, v+1, r.value))
		}
		r.value = v + 1
		r.writes++
		r.event(id, fmt.Sprintf("writes %d, releases", v+1))
		return true
	}
	r.event(id, "access refused by fence, releases")
	return false
}

// access is one access to the register carrying fence; it reports the
// current value and whether the fence check let it through. The caller
// holds r.mu.
func (r *recorder) access(fence int64) (int64, bool) {
	if !r.o.NoFence && fence > 0 {
		if fence < r.maxFence {
			r.fenceRef++
			return r.value, false
		}
		r.maxFence = fence
	}
	return r.value, true
}
