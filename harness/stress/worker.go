// The worker of process mode: the hidden "locklab worker" command, one
// client in its own process, and the JSON lines it trades with the parent.

package stress

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// Events a worker reports on its stdout, one JSON object per line.
const (
	EvReady    = "ready"    // the worker is up and starts trying
	EvAcquired = "acquired" // the lock was acquired: fence, token, wait
	EvEnter    = "enter"    // entering the critical section: read the register (answered)
	EvLeave    = "leave"    // leaving it: write value to the register (answered)
	EvReleased = "released" // the lease was released (err set if the release failed)
	EvError    = "error"    // an acquire attempt failed with err
)

// WorkerEvent is one line a worker writes on its stdout.
type WorkerEvent struct {
	Ev    string        `json:"ev"`
	Fence int64         `json:"fence,omitempty"`
	Token string        `json:"token,omitempty"`
	Wait  time.Duration `json:"wait,omitempty"`
	Value int64         `json:"value,omitempty"`
	Err   string        `json:"err,omitempty"`
}

// WorkerReply is the parent's answer, one JSON line on the worker's stdin,
// to an EvEnter (the value read) and to an EvLeave (whether the write was
// accepted). OK is false when the register's fence check refused the
// access.
type WorkerReply struct {
	Value int64 `json:"value"`
	OK    bool  `json:"ok"`
}

// workerArgs are the flags of a worker, built by the parent and parsed by
// Worker.
func workerArgs(o *Options, store StoreRun, id int, seed uint64, skew time.Duration) []string {
	args := []string{
		"--strategy", o.Strategy, "--key", o.Key, "--ttl", o.TTL.String(),
		"--hold-max", o.HoldMax.String(), "--seed", fmt.Sprint(seed), "--id", fmt.Sprint(id),
		"--skew", skew.String(),
	}
	args = append(args, "--store", o.Store.Store())
	for _, a := range store.WorkerArgs(id) {
		args = append(args, "--store-arg", a)
	}
	return args
}

// Worker is one client of a process-mode run, as run by the hidden
// "locklab worker" command: it loops acquire, critical section, release on
// the servers of the store --store names (a registered StoreDriver),
// through connections of its own that the store's Worker makes from the
// values of --store-arg (its sessions end when the process dies); it reports
// each step on out as a JSON WorkerEvent line, and takes its register
// accesses' answers as WorkerReply lines from in. It returns nil when in is
// closed (the parent is gone or done) or ctx ends.
func Worker(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	w, err := parseWorkerFlags(args)
	if err != nil {
		return err
	}
	l, retry, closeAll, err := w.locker(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	w.run(ctx, l, retry, in, out)
	return nil
}

// workerFlags are a worker's flags, as workerArgs builds them.
type workerFlags struct {
	strategy, key string
	store         string
	storeArgs     []string
	ttl, holdMax  time.Duration
	skew          time.Duration
	seed          uint64
	id            int
}

// parseWorkerFlags parses a worker's flags, and refuses a worker given no
// servers.
func parseWorkerFlags(args []string) (*workerFlags, error) {
	w := &workerFlags{}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&w.strategy, "strategy", "", "")
	fs.StringVar(&w.key, "key", "locklab:stress", "")
	fs.StringVar(&w.store, "store", "", "")
	fs.Func("store-arg", "", func(s string) error { w.storeArgs = append(w.storeArgs, s); return nil })
	fs.DurationVar(&w.ttl, "ttl", 100*time.Millisecond, "")
	fs.DurationVar(&w.holdMax, "hold-max", 2*time.Millisecond, "")
	fs.DurationVar(&w.skew, "skew", 0, "")
	fs.Uint64Var(&w.seed, "seed", 1, "")
	fs.IntVar(&w.id, "id", 0, "")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if w.store == "" {
		return nil, errors.New("worker: no --store")
	}
	return w, nil
}

// locker makes the worker's locker on the servers its flags give, with
// the retry policy its acquires wait with; closeAll closes the store's
// connections it opened.
func (w *workerFlags) locker(ctx context.Context) (l locklab.Locker, retry locklab.RetryPolicy, closeAll func(), err error) {
	_, factory, err := strategies.Lookup(w.strategy)
	if err != nil {
		return nil, retry, nil, err
	}
	d := LookupStore(w.store)
	if d == nil {
		return nil, retry, nil, fmt.Errorf("worker: --store %s: no such store is registered", w.store)
	}
	cfg := lockConfig(w.ttl)
	closeStore, err := d.Worker(ctx, w.storeArgs, &cfg)
	if err != nil {
		return nil, retry, nil, err
	}
	if w.skew != 0 {
		cfg.Clock = locklab.ClockFunc(func() time.Time { return time.Now().Add(w.skew) })
	}
	if l, err = factory(cfg); err != nil {
		closeStore()
		return nil, retry, nil, err
	}
	return l, cfg.Retry, closeStore, nil
}

// run is the worker's loop on l: it says it is ready,
// then acquires (waiting with retry), asks the parent for the register's
// value, holds the lock up to --hold-max, writes value+1 and releases,
// reporting each step on out, until ctx ends or the parent closes the
// pipe.
func (w *workerFlags) run(ctx context.Context, l locklab.Locker, retry locklab.RetryPolicy, in io.Reader, out io.Writer) {
	rng := rand.New(rand.NewPCG(w.seed, uint64(w.id)))
	enc := json.NewEncoder(out)
	dec := json.NewDecoder(in)
	ask := func(e WorkerEvent) (WorkerReply, error) {
		var rep WorkerReply
		if err := enc.Encode(e); err != nil {
			return rep, err
		}
		return rep, dec.Decode(&rep)
	}
	if enc.Encode(WorkerEvent{Ev: EvReady}) != nil {
		return
	}
	for ctx.Err() == nil {
		t0 := time.Now()
		lease, err := locklab.Wait(ctx, l, w.key, w.ttl, retry)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if enc.Encode(WorkerEvent{Ev: EvError, Err: err.Error()}) != nil {
				return
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if enc.Encode(WorkerEvent{Ev: EvAcquired, Fence: lease.Fence, Token: lease.Token, Wait: time.Since(t0)}) != nil {
			return
		}
		read, err := ask(WorkerEvent{Ev: EvEnter, Fence: lease.Fence})
		if err != nil {
			return // the parent closed the pipe
		}
		time.Sleep(time.Duration(rng.Int64N(int64(w.holdMax) + 1)))
		if _, err := ask(WorkerEvent{Ev: EvLeave, Fence: lease.Fence, Value: read.Value + 1}); err != nil {
			return
		}
		ev := WorkerEvent{Ev: EvReleased}
		if err := l.Release(context.WithoutCancel(ctx), lease); err != nil {
			ev.Err = err.Error()
		}
		if enc.Encode(ev) != nil {
			return
		}
	}
}
