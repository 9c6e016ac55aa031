// The client side of a run: each client runs its program (acquire, write,
// sleep, release, crash) in its own goroutine, calling the strategy under
// test; every action and every Redis command it sends is submitted to the
// scheduler and waits for its grant.

package harness

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/fanout"
)

type request struct {
	c     *client
	owner *owner
	node  int // 1-based; 0 for a local action
	// text is how the operation shows in the history (Event.Command).
	text  []string
	local string
	seq   int
	done  chan struct{}
	err   error
	event int // index of the event the grant created
	// touch is what the step reads and writes, as its store declared it
	// (nil: everything).
	touch *Touch
}

// command is how a request shows in a history: the local action, or the
// operation as its store shows it.
func (q *request) command() []string {
	if q.local != "" {
		return []string{q.local}
	}
	return q.text
}

// owner is who will run once a request is granted: a connection (its
// goroutine) or the client's program loop (for local actions). multi: the
// connection is inside a transaction, between a MULTI that succeeded and
// its EXEC or DISCARD (the explorer does not branch there: explore.go).
type owner struct{ active, multi bool }

type client struct {
	id     int
	prog   Program
	probe  bool
	locker locklab.Locker
	ctx    context.Context
	cancel context.CancelFunc

	// guarded by run.mu
	skew    time.Duration
	pending []*request
	active  int
	done    bool
	// ended: c's program ran to its end (or failed) before the run
	// stopped it; a request of c's after that comes from a goroutine that
	// outlived the call that started it.
	ended    bool
	crashed  bool
	paused   bool
	isolated bool
	// loseReply: the reply to the client's next request is lost (lose).
	loseReply bool
	// sleeping: the client is in a sleep step, its whole process paused,
	// its renewal with it (renew.go); renewLost: a renewal of its lease
	// failed, and its watchdog stopped; renewer is the strategy on the
	// store's own connections that renews its lease.
	sleeping  bool
	renewLost bool
	renewer   locklab.Locker
	holding   bool
	lease     locklab.Lease
	seq       int
	// guard is what the client's guarded writes check, read when it took
	// the lock and moved on with each write it made (Scenario.Guarded);
	// unguarded: the read failed, and the client writes nothing.
	guard     Guard
	unguarded bool
	inRelease bool
	// waiting: the client waits for an event of its store's
	// (Client.Wait), and has no step to run until it comes.
	waiting bool
	// ending: c crashed in its program and the store has not yet seen it
	// (Store.Crashed): no step runs until it has, as none could run
	// between the crash and the death of its sessions.
	ending    bool
	lastEvent int
	merge     int // event the next command joins (-1: none)
	changed   time.Time
	// burst has bit i-1 set for every node i sent a command since the
	// client was last idle (nothing pending, nothing running): once every
	// node has had its command, a fan-out has nothing more to send. fan is
	// how many nodes the burst's round said it sends to (internal/fanout;
	// 0: it did not say): once that many have had theirs, neither.
	burst uint64
	fan   int
	info  ClientInfo
	local owner
	// handle is the client as its store sees it.
	handle *Client
}

// seeded returns a deterministic random source for client id.
func seeded(seed uint64, id int) *rand.ChaCha8 {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	binary.LittleEndian.PutUint64(s[8:], uint64(id))
	copy(s[16:], "locklab-harness!")
	return rand.NewChaCha8(s)
}

// addClient creates client id with its wrapped Config and starts its
// program loop.
func (r *run) addClient(prog Program, probe bool) (*client, error) {
	c := &client{id: len(r.cls) + 1, prog: prog, probe: probe}
	c.ctx, c.cancel = context.WithCancel(r.ctx)
	c.info = ClientInfo{ID: c.id, Program: prog.String(), Probe: probe}
	c.lastEvent = -1
	c.merge = -1
	cfg := locklab.Config{
		Clock:      locklab.ClockFunc(func() time.Time { return r.clock(c) }),
		Rand:       seeded(r.spec.seed, c.id),
		Retry:      locklab.RetryPolicy{Attempts: 1},
		NoWatchdog: r.spec.noWatchdog,
	}
	c.handle = &Client{r: r, c: c}
	if err := r.slot.store.Connect(c.handle, &cfg); err != nil {
		r.fail(err)
	}
	l, err := r.build(c, cfg)
	if err != nil {
		return nil, err
	}
	c.locker = l
	r.mu.Lock()
	r.cls = append(r.cls, c)
	c.changed = time.Now()
	r.mu.Unlock()
	r.wg.Add(1)
	go r.loop(c)
	return c, nil
}

func (r *run) clock(c *client) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The clock ticks once after each step after which a client reads it,
	// so that clients that read their clocks at different steps see
	// different times (and timestamp locks written at different steps
	// differ), as on real machines, and every read after one step sees the
	// same time. A value read then depends on which steps read before, not
	// on how many steps ran: a step that reads nothing commutes with one
	// that does (effect.go). Ticks are far below any TTL: only "time"
	// events make locks expire.
	if r.tickedAt != len(r.steps) {
		r.now += stepTick
		r.tickedAt = len(r.steps)
	}
	r.clockReads++
	return Epoch.Add(r.now + c.skew)
}

// lateRequest is the error of a run whose client c sent text when no
// call of its program was running.
func lateRequest(c *client, text []string) error {
	return fmt.Errorf("%w: c%d sent %s after its program had ended: a goroutine of the lock outlived the call that started it "+
		"(a run schedules the requests a client makes inside its calls)", ErrUnscheduled, c.id, strings.Join(text, " "))
}

// submit queues a request and blocks until it is granted, rejected, or ctx
// ends.
func (r *run) submit(ctx context.Context, c *client, o *owner, node int, cmd string, args []any, local string) (*request, error) {
	return r.submitTouching(ctx, c, o, node, CommandText(cmd, args), local, nil)
}

// submitTouching is submit of a step that touches t.
func (r *run) submitTouching(ctx context.Context, c *client, o *owner, node int, text []string, local string, t *Touch) (*request, error) {
	r.mu.Lock()
	if c.crashed || c.done {
		late := c.ended && !c.crashed && !r.stopping
		r.mu.Unlock()
		if c.crashed {
			return nil, errCrashed
		}
		if late {
			r.fail(lateRequest(c, text))
		}
		return nil, errStopped
	}
	if o.active {
		o.active = false
		c.active--
	}
	if o != &c.local && c.local.active {
		c.local.active = false
		c.active--
	}
	c.waiting = false
	r.reqs++
	t = r.unsuffixed(t)
	q := &request{c: c, owner: o, node: node, text: text, local: local, seq: r.reqs, done: make(chan struct{}), touch: t}
	if node != 0 && c.merge >= 0 && !r.spec.multi {
		// The first command of an operation runs in the step that began
		// the operation.
		q.event = c.merge
		c.merge = -1
		e := &r.hist.Events[q.event]
		e.Node = node
		e.Command = q.command()
		e.Touch = t
		o.active = true
		c.active++
		c.changed = time.Now()
		r.mu.Unlock()
		return q, nil
	}
	c.merge = -1
	if len(c.pending) == 0 && c.active == 0 {
		c.burst, c.fan = 0, 0
	}
	if node > 0 {
		c.burst |= 1 << (node - 1)
		c.fan = max(c.fan, fanout.Of(ctx))
	}
	c.pending = append(c.pending, q)
	c.changed = time.Now()
	r.mu.Unlock()
	r.notify()
	select {
	case <-q.done:
	case <-ctx.Done():
		r.mu.Lock()
		if i := slices.Index(c.pending, q); i >= 0 {
			c.pending = slices.Delete(c.pending, i, i+1)
			c.changed = time.Now()
			r.mu.Unlock()
			r.notify()
			return nil, ctx.Err()
		}
		r.mu.Unlock()
		<-q.done
	}
	return q, q.err
}

// idle marks o as no longer running (its connection was closed).
func (r *run) idle(c *client, o *owner) {
	r.mu.Lock()
	if o.active {
		o.active = false
		c.active--
		c.changed = time.Now()
	}
	r.mu.Unlock()
	r.notify()
}

// eventLocked returns event i of the run's history to write, nil where
// there is none or the history is sealed: finish has judged it, and the
// caller reads it without the lock, so an answer or a note that comes
// later (a connection a store's client closes on its own goroutine,
// failing what was still in flight) is not recorded.
func (r *run) eventLocked(i int) *Event {
	if r.sealed || i < 0 || i >= len(r.hist.Events) {
		return nil
	}
	return &r.hist.Events[i]
}

func (r *run) noteLocked(c *client, format string, args ...any) {
	e := r.eventLocked(c.lastEvent)
	if e == nil {
		return
	}
	e.Notes = append(e.Notes, fmt.Sprintf("c%d "+format, append([]any{c.id}, args...)...))
}

// holdersLocked lists the clients inside the critical section: holding a
// lease that is still valid on their own clock, not releasing, not crashed.
func (r *run) holdersLocked() []int {
	h := []int{}
	for _, c := range r.cls {
		if c.holding && !c.crashed && !c.inRelease && Epoch.Add(r.now+c.skew).Before(c.lease.Until) {
			h = append(h, c.id)
		}
	}
	return h
}

// loop runs c's program, one op after the other, until it ends, c
// crashes, or an op finds the run over.
func (r *run) loop(c *client) {
	defer r.wg.Done()
	defer func() {
		if v := recover(); v != nil {
			r.fail(panicked(c, v))
		}
		r.mu.Lock()
		c.done = true
		c.ended = !r.stopping
		if c.ended && len(c.pending) > 0 {
			// No call of the program runs now: a goroutine sent it.
			defer r.fail(lateRequest(c, c.pending[0].command()))
		}
		c.changed = time.Now()
		if c.local.active {
			c.local.active = false
			c.active--
		}
		r.mu.Unlock()
		r.notify()
	}()
	for _, op := range c.prog {
		r.mu.Lock()
		stop := c.crashed
		holding := c.holding
		r.mu.Unlock()
		if stop {
			return
		}
		goOn := true
		switch op.Kind {
		case OpAcquire:
			goOn = holding || r.acquire(c, op)
		case OpWrite:
			goOn = !holding || r.writeOp(c)
		case OpSleep:
			goOn = r.sleep(c, op)
		case OpRelease:
			goOn = !holding || r.release(c)
		case OpCrash:
			r.crash(c)
			goOn = false
		}
		if !goOn {
			return
		}
	}
}

// ErrPanicked is what a run fails with when the strategy panicked in one
// of its client's operations or in its factory: the run ends with the
// panic's value and where it happened, and the servers are left as every
// run leaves them.
var ErrPanicked = errors.New("the strategy panicked")

// panicked is the error of client c's strategy's panic v.
func panicked(c *client, v any) error {
	return fmt.Errorf("c%d: %w: %v\n%s", c.id, ErrPanicked, v, debug.Stack())
}

// build runs the strategy's factory for client c, a panic in it an error.
func (r *run) build(c *client, cfg locklab.Config) (l locklab.Locker, err error) {
	defer func() {
		if v := recover(); v != nil {
			l, err = nil, panicked(c, v)
		}
	}()
	return r.spec.factory(cfg)
}

func (r *run) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

// reply records a granted command's answer in its event. more says the
// command's step goes on (Conn.Continue completes it): the client
// stays running until it is done.
func (r *run) reply(q *request, v any, err error, more bool) {
	r.mu.Lock()
	e := r.eventLocked(q.event)
	if e == nil {
		r.mu.Unlock()
		return
	}
	e.Reply = fmtReply(v, err)
	q.c.changed = time.Now()
	if r.spec.multi {
		// Fan-out goroutines may keep their connection open: count them as
		// idle once the answer is in; the quiet period covers the rest.
		if q.owner.active && !more {
			q.owner.active = false
			q.c.active--
		}
	}
	r.mu.Unlock()
	r.notify()
}
