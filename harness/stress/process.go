// Process mode, the parent's side: a worker process per client slot, whose
// register accesses it answers, which it pauses with SIGSTOP, and which it
// crashes with SIGKILL and replaces.

package stress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxQuickExits is how many workers of one slot may exit in a row, without
// reporting anything and without being killed, before the run fails.
const maxQuickExits = 3

// worker runs one client slot in process mode: it starts a worker, serves
// its register accesses, injects SIGSTOP pauses and SIGKILL crashes, and
// starts a replacement after each crash, until ctx ends.
func (r *recorder) worker(ctx context.Context, cancel context.CancelFunc, id int) {
	rng := rand.New(rand.NewPCG(r.o.Seed, uint64(id)))
	quick := 0
	for inc := 0; ctx.Err() == nil; inc++ {
		var skew time.Duration
		if r.o.Skew > 0 {
			skew = time.Duration(rng.Int64N(int64(2*r.o.Skew))) - r.o.Skew
		}
		seed := r.o.Seed ^ uint64(inc)<<32
		events, killed, err := r.incarnate(ctx, cancel, id, seed, skew, rng)
		if ctx.Err() != nil {
			return
		}
		if err != nil || (events == 0 && !killed) {
			if err == nil {
				err = errors.New("exited before its first event")
			}
			r.addErr(fmt.Errorf("worker %d: %w", id, err))
			if quick++; quick >= maxQuickExits {
				r.fail(fmt.Errorf("worker %d: %w", id, err))
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		quick = 0
	}
}

// proc is one worker process.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex // guards the signals below against the exit
	exited bool
	done   chan struct{} // closed when the process has exited
}

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		_ = p.cmd.Process.Signal(sig)
	}
}

// incarnate runs one worker process until it exits, it is killed as a
// crash, or ctx ends (then it is killed too). It returns how many events
// the worker reported, whether the run killed it as a crash, and why it
// ended when it ended by itself.
func (r *recorder) incarnate(ctx context.Context, cancel context.CancelFunc, id int, seed uint64, skew time.Duration, rng *rand.Rand) (int, bool, error) {
	argv := append(append([]string(nil), r.o.WorkerCommand...), workerArgs(&r.o, r.store, id, seed, skew)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// The worker dies with the parent (the thread that started it); a
	// closed stdin ends it too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{buf: &stderr, n: 4096}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, false, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, false, err
	}
	if err := cmd.Start(); err != nil {
		return 0, false, err
	}
	p := &proc{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	var pauses sync.WaitGroup
	events, killed := r.serve(ctx, cancel, id, p, stdout, rng, &pauses)
	if !killed {
		p.signal(syscall.SIGKILL) // ctx ended, or the worker broke protocol
	}
	stdin.Close()
	werr := cmd.Wait()
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	close(p.done)
	pauses.Wait()
	if killed || ctx.Err() != nil {
		return events, killed, nil
	}
	if werr == nil {
		werr = fmt.Errorf("exited")
	}
	return events, false, fmt.Errorf("%w: %s", werr, strings.TrimSpace(stderr.String()))
}

// serve reads the worker's events until its stdout closes or the run kills
// it, stamping each on the run's clock as it arrives.
func (r *recorder) serve(ctx context.Context, cancel context.CancelFunc, id int, p *proc, stdout io.Reader, rng *rand.Rand, pauses *sync.WaitGroup) (int, bool) {
	sc := bufio.NewScanner(stdout)
	enc := json.NewEncoder(p.stdin)
	var (
		events int
		read   int64
		readOK bool
		fence  int64
		inside bool
	)
	crash := func() bool {
		if r.o.CrashProb <= 0 || rng.Float64() >= r.o.CrashProb {
			return false
		}
		p.signal(syscall.SIGKILL)
		r.crashes.Add(1)
		r.mu.Lock()
		if inside {
			// A dead process accesses the register no more.
			delete(r.inside, id)
		}
		r.event(id, "SIGKILL (crash)")
		r.mu.Unlock()
		return true
	}
	up := false // counted in workersUp
	defer func() {
		if up {
			r.workersUp.Add(-1)
		}
	}()
	for sc.Scan() {
		var e WorkerEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			r.addErr(fmt.Errorf("worker %d: unreadable event: %w", id, err))
			return events, false
		}
		events++
		switch e.Ev {
		case EvReady:
			// A worker that has just started has not been kept from the
			// lock: the stuck window starts again (see stuck).
			r.workerReady.Store(int64(r.now()))
			if !up {
				up = true
				r.workersUp.Add(1)
			}
		case EvError:
			r.addErr(errors.New(e.Err))
		case EvAcquired:
			r.lastAcquire.Store(int64(r.now()))
			r.mu.Lock()
			r.latency = append(r.latency, e.Wait)
			r.event(id, fmt.Sprintf("acquires (fence %d, token %s)", e.Fence, e.Token))
			r.mu.Unlock()
		case EvEnter:
			fence = e.Fence
			read, readOK = r.enter(id, e.Fence)
			inside = true
			if r.o.PauseProb > 0 && rng.Float64() < r.o.PauseProb {
				r.pause(ctx, id, p, pauses)
			}
			if enc.Encode(WorkerReply{Value: read, OK: readOK}) != nil {
				return events, false
			}
		case EvLeave:
			inside = false
			// The worker writes what it read plus one; a refused read was
			// answered with the current value, so its write stays refused.
			ok := r.leave(id, fence, e.Value-1, readOK)
			if enc.Encode(WorkerReply{Value: e.Value, OK: ok}) != nil {
				return events, false
			}
		case EvReleased:
			if e.Err != "" {
				r.mu.Lock()
				r.event(id, "release failed: "+e.Err)
				r.mu.Unlock()
			}
			if n := r.cycles.Add(1); r.o.Cycles > 0 && n >= r.o.Cycles {
				cancel()
			}
		}
		if crash() {
			return events, true
		}
	}
	if inside {
		r.mu.Lock()
		delete(r.inside, id)
		r.mu.Unlock()
	}
	return events, false
}

// pause stops the worker with SIGSTOP inside its critical section and
// continues it PauseFor later (or when the run ends).
func (r *recorder) pause(ctx context.Context, id int, p *proc, pauses *sync.WaitGroup) {
	r.pauses.Add(1)
	p.signal(syscall.SIGSTOP)
	r.mu.Lock()
	r.event(id, fmt.Sprintf("SIGSTOP for %v inside the critical section", r.o.PauseFor))
	r.mu.Unlock()
	pauses.Add(1)
	go func() {
		defer pauses.Done()
		select {
		case <-ctx.Done():
		case <-p.done:
			return
		case <-time.After(r.o.PauseFor):
		}
		p.signal(syscall.SIGCONT)
		r.mu.Lock()
		r.event(id, "SIGCONT")
		r.mu.Unlock()
	}()
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	buf *bytes.Buffer
	n   int
}

func (w *limitedWriter) Write(b []byte) (int, error) {
	if room := w.n - w.buf.Len(); room > 0 {
		w.buf.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}
