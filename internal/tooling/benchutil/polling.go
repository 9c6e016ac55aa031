package benchutil

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/counting"
)

// PollMode is how a blocked client spends the time between two attempts:
// sleeping by a RetryPolicy (locklab.Wait), or waiting for a release
// notification (a locklab.Notifier's Wait and Release).
type PollMode struct {
	Name     string
	Policy   locklab.RetryPolicy
	Notifier bool
}

// PollModes are the three ways of waiting the docs compare: Wait's default
// policy (4ms doubling to 250ms, jittered, no further than the holder's
// age tells: locklab.HoldFactor), a fixed 5ms loop (the PHP
// do/while with usleep(5000) of the survey of Redis locks: Initial = Max =
// 5ms, no jitter to speak of), and the Notifier.
var PollModes = []PollMode{
	{Name: "Wait, default policy"},
	{Name: "Wait, fixed 5ms", Policy: FixedPolicy(5 * time.Millisecond)},
	{Name: "Notifier", Notifier: true},
}

// FixedPolicy is a RetryPolicy that sleeps d between attempts, every time:
// Initial = Max = d, and a jitter so small it never shows (a zero Jitter
// picks the default, 0.5).
func FixedPolicy(d time.Duration) locklab.RetryPolicy {
	return locklab.RetryPolicy{Initial: d, Max: d, Multiplier: 1, Jitter: math.SmallestNonzeroFloat64}
}

// PollResult is what one contended run cost.
type PollResult struct {
	Mode     string
	Waiters  int
	Locks    int64
	Commands int64
	Elapsed  time.Duration
}

// PerLock is the Redis commands sent per lock acquired: the acquire
// attempts, refused ones included, the release and, for the Notifier, its
// subscription.
func (r PollResult) PerLock() float64 {
	if r.Locks == 0 {
		return math.Inf(1)
	}
	return float64(r.Commands) / float64(r.Locks)
}

// PerSecond is the locks acquired per second.
func (r PollResult) PerSecond() float64 { return float64(r.Locks) / r.Elapsed.Seconds() }

// Poll runs clients that each, for d, wait for the lock on key in mode,
// hold it for hold, and release it, every client with a Locker of its own
// built by newLocker on one counting connection source over src. It
// returns how many locks were acquired and how many commands all of them
// sent. newLocker must build a lock whose release the Notifier hears
// (set-nx-px with Config.Notify) when mode is the Notifier.
func Poll(ctx context.Context, src locklab.ConnSource, newLocker func(locklab.ConnSource) (locklab.Locker, error),
	key string, mode PollMode, clients int, hold, d time.Duration) (PollResult, error) {
	counted := &counting.Source{Src: src}
	var n *locklab.Notifier
	if mode.Notifier {
		n = locklab.NewNotifier(counted)
		defer n.Close()
	}
	lockers := make([]locklab.Locker, clients)
	for i := range lockers {
		l, err := newLocker(counted)
		if err != nil {
			return PollResult{}, err
		}
		lockers[i] = l
	}
	run, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		locks    atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for _, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for run.Err() == nil {
				var lease locklab.Lease
				var err error
				if n != nil {
					lease, err = n.Wait(run, l, key, time.Minute, mode.Policy)
				} else {
					lease, err = locklab.Wait(run, l, key, time.Minute, mode.Policy)
				}
				if err != nil {
					// Wait gives up a little before the deadline when
					// its next attempt would come after it.
					if !errors.Is(err, context.DeadlineExceeded) {
						mu.Lock()
						firstErr = errors.Join(firstErr, err)
						mu.Unlock()
					}
					return
				}
				locks.Add(1)
				time.Sleep(hold)
				if n != nil {
					err = n.Release(context.Background(), l, lease)
				} else {
					err = l.Release(context.Background(), lease)
				}
				if err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return PollResult{Mode: mode.Name, Waiters: clients, Locks: locks.Load(), Commands: counted.Commands(),
		Elapsed: time.Since(start)}, firstErr
}
