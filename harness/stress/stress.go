// The run loop: Run starts the clients (and the node faults), watches for
// a lock nobody can take, and the recorder keeps the shared state of the
// run that the report is made from.

package stress

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// Run stresses the strategy until the duration or cycle count is reached, a
// liveness violation ends the run, or ctx is done. A violation is a result,
// not an error.
func Run(ctx context.Context, o Options) (rep *Report, rerr error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	store, err := o.sd.Start(ctx, o.Store, o)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if o.ns.IsZero() {
		if err := store.Empty(ctx); err != nil {
			return nil, err
		}
	} else if sw, ok := store.(Sweeper); ok {
		defer func() {
			if err := sw.Sweep(); err != nil && rerr == nil {
				rep, rerr = nil, err
			}
		}()
	}
	r := newRecorder(o)
	r.store = store
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	r.stop = cancel

	var wg sync.WaitGroup
	if len(o.Faults) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.faults(ctx)
		}()
	}
	for i := 0; i < o.Clients; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			if o.Processes {
				r.worker(ctx, cancel, id)
			} else {
				r.client(ctx, cancel, id)
			}
		}(i)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			if o.Progress != nil {
				o.Progress(r.progress())
			}
			if kind, ok := r.stuck(ctx); ok {
				r.violate(kind, fmt.Sprintf("nobody acquired %q for %v while clients kept trying", o.Key, o.Stuck))
				r.liveness = kind
				cancel()
			}
		}
	}
	if err := r.fatalErr(); err != nil {
		return nil, err
	}
	rep = r.report()
	rep.Interrupted = parent.Err() != nil
	return rep, nil
}

// recorder holds the shared state of a run: the register, the intervals of
// the critical sections, the counters and the recent events.
type recorder struct {
	o     Options
	start time.Time
	stop  context.CancelFunc
	store StoreRun // the store's part of the run

	cycles, errs, pauses, crashes atomic.Int64
	lastAcquire                   atomic.Int64 // ns since start
	workerReady                   atomic.Int64 // ns since start: the latest worker process up
	workersUp                     atomic.Int64 // worker processes up and trying
	// faulting is set while a node fault is injected; faultEnded is when
	// the last one ended (ns since start). Liveness is not judged during a
	// fault, and the stuck window starts again when it ends.
	faulting   atomic.Bool
	faultEnded atomic.Int64

	mu       sync.Mutex
	inside   map[int]time.Duration // clients in the critical section, since when
	value    int64                 // the register
	maxFence int64
	writes   int64 // accepted writes
	overlaps int64
	fenceRef int64
	latency  []time.Duration
	counts   map[string]int64
	first    []Violation
	inFaults map[string]int64
	firstIn  []Violation
	recent   []Event // ring of the last events
	liveness string
	nfaults  []NodeFault
	fatal    error
	firstErr string // the first of errs
	// ops is the history of the register (linearizability.go), and open
	// the operation each client inside is in, by client.
	ops  []porcupine.Operation
	open map[int]int
}

// fail ends the run with an error rather than a report.
func (r *recorder) fail(err error) {
	r.mu.Lock()
	if r.fatal == nil {
		r.fatal = err
	}
	r.mu.Unlock()
	r.stop()
}

// addErr counts a failed acquire (or a client that could not start) and
// keeps the first error's message for the report.
func (r *recorder) addErr(err error) {
	r.errs.Add(1)
	r.mu.Lock()
	if r.firstErr == "" && err != nil {
		r.firstErr = strings.TrimPrefix(err.Error(), "locklab: ")
	}
	r.mu.Unlock()
}

func (r *recorder) fatalErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

func newRecorder(o Options) *recorder {
	return &recorder{o: o, start: time.Now(), inside: map[int]time.Duration{}, counts: map[string]int64{}, inFaults: map[string]int64{}, open: map[int]int{}}
}

func (r *recorder) now() time.Duration { return time.Since(r.start) }

const recentEvents = 16

// event records a timeline line; the caller holds r.mu.
func (r *recorder) event(client int, what string) {
	e := Event{At: r.now(), Client: client, What: what}
	if len(r.recent) == recentEvents {
		copy(r.recent, r.recent[1:])
		r.recent = r.recent[:recentEvents-1]
	}
	r.recent = append(r.recent, e)
}

// violateLocked counts n violations of a kind and keeps the first of each
// kind with the events before it; the caller holds r.mu.
func (r *recorder) violateLocked(kind string, n int64, detail string) {
	var v *Violation
	keep := func() Violation {
		if v == nil {
			v = &Violation{Kind: kind, At: r.now(), Detail: detail, Timeline: append([]Event(nil), r.recent...)}
		}
		return *v
	}
	if r.counts[kind] == 0 {
		r.first = append(r.first, keep())
	}
	r.counts[kind] += n
	if r.faulting.Load() {
		if r.inFaults[kind] == 0 {
			r.firstIn = append(r.firstIn, keep())
		}
		r.inFaults[kind] += n
	}
	if r.o.StopOnViolation && r.stop != nil {
		r.stop()
	}
}

func (r *recorder) violate(kind string, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violateLocked(kind, 1, detail)
}

// stuck reports a liveness violation: nobody acquired for o.Stuck, not
// counting the time spent inside an injected node fault (a lock that a
// fault alone makes unobtainable is no violation until the fault is over)
// nor the time before the latest worker process was up (starting one takes
// a while on a loaded machine; a crashed worker's successor is not kept
// from the lock before it tries).
func (r *recorder) stuck(ctx context.Context) (string, bool) {
	if r.liveness != "" || ctx.Err() != nil || r.faulting.Load() || (r.o.Processes && r.workersUp.Load() == 0) {
		return "", false
	}
	last := time.Duration(max(r.lastAcquire.Load(), r.faultEnded.Load(), r.workerReady.Load()))
	if r.now()-last < r.o.Stuck {
		return "", false
	}
	return r.store.Stuck(ctx, r.o.Key)
}
