package harness

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
)

// stepTick is the virtual time one client step takes.
const stepTick = time.Millisecond

// Epoch is where every virtual clock starts: runs do not depend on the
// wall clock.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Factory builds the Locker under test from a Config the harness wraps.
type Factory func(cfg locklab.Config) (locklab.Locker, error)

var (
	errCrashed     = errors.New("client crashed")
	errStopped     = errors.New("run over")
	errUnreachable = errors.New("node unreachable")
)

// runSpec is everything one run needs.
type runSpec struct {
	strategy string
	scenario string
	factory  Factory
	multi    bool
	programs []Program
	key      string
	ttl      time.Duration
	seed     uint64
	record   bool
	fenced   bool
	property Property
	waiter   int
	maxSteps int
	// quiet is how long a multi-node client must stay unchanged before the
	// scheduler takes its outstanding commands as all there is.
	quiet time.Duration
	// stopEarly ends the run at the first safety violation.
	stopEarly bool
	// prepare: call the nodes' Prepare before each run (failover
	// scenarios: a replica in sync, then cut off).
	prepare bool
}

// chooser picks the next step among the enabled client steps (it may also
// return an event); ok=false ends the run.
type chooser func(r *run, enabled []Step) (Step, bool)

type request struct {
	c     *client
	owner *owner
	node  int // 1-based; 0 for a local action
	cmd   string
	args  []any
	local string
	seq   int
	done  chan struct{}
	err   error
	event int // index of the event the grant created
}

// owner is who will run once a request is granted: a connection (its
// goroutine) or the client's program loop (for local actions).
type owner struct{ active bool }

type client struct {
	id     int
	prog   Program
	probe  bool
	locker locklab.Locker
	ctx    context.Context
	cancel context.CancelFunc

	// guarded by run.mu
	skew      time.Duration
	pending   []*request
	active    int
	done      bool
	crashed   bool
	paused    bool
	isolated  bool
	holding   bool
	lease     locklab.Lease
	seq       int
	inRelease bool
	lastEvent int
	merge     int // event the next command joins (-1: none)
	changed   time.Time
	info      ClientInfo
	local     owner
}

type run struct {
	spec       runSpec
	slot       *slot
	ctx        context.Context
	mu         sync.Mutex
	wake       chan struct{}
	now        time.Duration // virtual time since Epoch
	hist       *History
	cls        []*client
	steps      Schedule
	down       []bool // node unreachable (killed, paused, partitioned)
	reqs       int
	acqs       int
	maxFence   int64
	lastWriter int // acquisition seq of the newest holder that wrote
	wg         sync.WaitGroup
	last       int // client of the previous client step
	err        error
}

func newRun(ctx context.Context, spec runSpec, sl *slot) *run {
	r := &run{spec: spec, slot: sl, ctx: ctx, wake: make(chan struct{}, 1),
		down: make([]bool, len(sl.nodes))}
	r.hist = &History{Strategy: spec.strategy, Scenario: spec.scenario, Key: spec.key, TTL: spec.ttl}
	for _, n := range sl.nodes {
		r.hist.Nodes = append(r.hist.Nodes, n.Name())
	}
	return r
}

func (r *run) notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// seeded returns a deterministic random source for client id.
func seeded(seed uint64, id int) *rand.ChaCha8 {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	binary.LittleEndian.PutUint64(s[8:], uint64(id))
	copy(s[16:], "locklab-harness!")
	return rand.NewChaCha8(s)
}

func (r *run) nodeCount() int {
	if r.spec.multi {
		return len(r.slot.nodes)
	}
	return 1
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
		Clock:       locklab.ClockFunc(func() time.Time { return r.clock(c) }),
		Rand:        seeded(r.spec.seed, c.id),
		NodeTimeout: time.Hour,
		Retry:       locklab.RetryPolicy{Attempts: 1},
	}
	if r.spec.multi {
		for i := range r.slot.nodes {
			cfg.Nodes = append(cfg.Nodes, &source{r: r, c: c, node: i + 1})
		}
	} else {
		cfg.Pool = &source{r: r, c: c, node: 1}
	}
	l, err := r.spec.factory(cfg)
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
	return Epoch.Add(r.now + c.skew)
}

// --- the client side -------------------------------------------------------

// submit queues a request and blocks until it is granted, rejected, or ctx
// ends.
func (r *run) submit(ctx context.Context, c *client, o *owner, node int, cmd string, args []any, local string) (*request, error) {
	r.mu.Lock()
	if c.crashed || c.done {
		r.mu.Unlock()
		if c.crashed {
			return nil, errCrashed
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
	r.reqs++
	q := &request{c: c, owner: o, node: node, cmd: cmd, args: args, local: local, seq: r.reqs, done: make(chan struct{})}
	if node != 0 && c.merge >= 0 && !r.spec.multi {
		// The first command of an operation runs in the step that began
		// the operation.
		q.event = c.merge
		c.merge = -1
		e := &r.hist.Events[q.event]
		e.Node = node
		if cmd == "pipeline" {
			e.Command = []string{"MULTI/pipeline"}
		} else {
			e.Command = fmtArgs(cmd, args)
		}
		o.active = true
		c.active++
		c.changed = time.Now()
		r.mu.Unlock()
		return q, nil
	}
	c.merge = -1
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

// release marks o as no longer running (its connection was closed).
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

func (r *run) note(c *client, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteLocked(c, format, args...)
}

func (r *run) noteLocked(c *client, format string, args ...any) {
	if c.lastEvent < 0 || c.lastEvent >= len(r.hist.Events) {
		return
	}
	e := &r.hist.Events[c.lastEvent]
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

// loop runs c's program.
func (r *run) loop(c *client) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		c.done = true
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
		switch op.Kind {
		case OpAcquire:
			if holding {
				continue
			}
			for i := 0; i < op.Attempts; i++ {
				r.mu.Lock()
				c.info.Attempts++
				r.mu.Unlock()
				if _, err := r.submit(c.ctx, c, &c.local, 0, "acquire", nil, "acquire"); err != nil {
					return
				}
				lease, err := c.locker.Acquire(c.ctx, r.spec.key, r.spec.ttl)
				r.mu.Lock()
				if c.crashed {
					r.mu.Unlock()
					return
				}
				if err == nil {
					r.acqs++
					c.holding, c.lease, c.seq = true, lease, r.acqs
					c.info.Acquired++
					step := 0
					if c.lastEvent >= 0 {
						step = r.hist.Events[c.lastEvent].Step
					}
					r.hist.Acquisitions = append(r.hist.Acquisitions, Acquisition{Client: c.id, Step: step, Token: lease.Token, Fence: lease.Fence, Seq: c.seq})
					if lease.Fence != 0 {
						r.noteLocked(c, "acquired (fence %d)", lease.Fence)
					} else {
						r.noteLocked(c, "acquired")
					}
					r.refreshHoldersLocked(c)
					r.mu.Unlock()
					break
				}
				switch {
				case errors.Is(err, locklab.ErrNotAcquired):
					r.noteLocked(c, "refused")
				case errors.Is(err, errStopped):
					r.mu.Unlock()
					return
				default:
					r.noteLocked(c, "acquire failed: %v", err)
				}
				r.mu.Unlock()
			}
		case OpWrite:
			if !holding {
				continue
			}
			if _, err := r.submit(c.ctx, c, &c.local, 0, "write", nil, "write"); err != nil {
				return
			}
			r.write(c)
		case OpSleep:
			if _, err := r.submit(c.ctx, c, &c.local, 0, "sleep", nil, "sleep "+op.Dur.String()); err != nil {
				return
			}
			if err := r.advance(op.Dur); err != nil {
				r.fail(err)
				return
			}
		case OpRelease:
			if !holding {
				continue
			}
			if _, err := r.submit(c.ctx, c, &c.local, 0, "release", nil, "release"); err != nil {
				return
			}
			r.mu.Lock()
			c.inRelease = true
			lease := c.lease
			r.mu.Unlock()
			err := c.locker.Release(c.ctx, lease)
			r.mu.Lock()
			if c.crashed {
				r.mu.Unlock()
				return
			}
			c.holding, c.inRelease = false, false
			switch {
			case err == nil:
				r.noteLocked(c, "released")
			case errors.Is(err, locklab.ErrNotHeld):
				r.noteLocked(c, "release: not held")
			default:
				r.noteLocked(c, "release failed: %v", err)
			}
			r.refreshHoldersLocked(c)
			r.mu.Unlock()
		case OpCrash:
			r.mu.Lock()
			r.crashLocked(c)
			r.noteLocked(c, "crashed")
			r.mu.Unlock()
			return
		}
	}
}

// refreshHoldersLocked updates the holders of c's last event.
func (r *run) refreshHoldersLocked(c *client) {
	if c.lastEvent >= 0 && c.lastEvent < len(r.hist.Events) {
		r.hist.Events[c.lastEvent].Holders = r.holdersLocked()
	}
}

func (r *run) write(c *client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := Write{Client: c.id, Fence: c.lease.Fence, Seq: c.seq, Accepted: true}
	if c.lastEvent >= 0 {
		w.Step = r.hist.Events[c.lastEvent].Step
	}
	if r.spec.fenced && w.Fence < r.maxFence {
		w.Accepted = false
	}
	w.Stale = r.lastWriter > c.seq
	if w.Accepted {
		r.maxFence = max(r.maxFence, w.Fence)
		r.lastWriter = max(r.lastWriter, c.seq)
		r.noteLocked(c, "wrote (fence %d)", w.Fence)
	} else {
		r.noteLocked(c, "write refused (fence %d<%d)", w.Fence, r.maxFence)
	}
	r.hist.Writes = append(r.hist.Writes, w)
}

func (r *run) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

// --- the connection wrapper --------------------------------------------------

// source is the ConnSource a client sees for one node.
type source struct {
	r    *run
	c    *client
	node int
}

func (s *source) GetContext(ctx context.Context) (redis.Conn, error) {
	s.r.mu.Lock()
	crashed := s.c.crashed
	s.r.mu.Unlock()
	if crashed {
		return nil, errCrashed
	}
	return &conn{src: s}, nil
}

// conn is the redis.Conn a strategy gets: every command waits for the
// scheduler's grant, then runs on a real connection to the node.
type conn struct {
	src      *source
	own      owner
	real     redis.Conn
	freeEval bool
	closed   bool
	sends    [][]any
	replies  []any
}

var _ redis.ConnWithContext = (*conn)(nil)

func (k *conn) Close() error {
	if k.closed {
		return nil
	}
	k.closed = true
	k.src.r.idle(k.src.c, &k.own)
	if k.real != nil {
		return k.real.Close()
	}
	return nil
}

func (k *conn) Err() error {
	if k.real != nil {
		return k.real.Err()
	}
	return nil
}

func (k *conn) Do(cmd string, args ...any) (any, error) {
	return k.DoContext(context.Background(), cmd, args...)
}

// Send queues a command; the queued commands run, in one step, at the next
// Do, Flush or Receive.
func (k *conn) Send(cmd string, args ...any) error {
	k.sends = append(k.sends, append([]any{cmd}, args...))
	return nil
}

func (k *conn) Flush() error {
	if len(k.sends) == 0 {
		return nil
	}
	v, err := k.DoContext(context.Background(), "")
	if err != nil {
		return err
	}
	k.replies = append(k.replies, v.([]any)...)
	return nil
}

func (k *conn) Receive() (any, error) {
	if err := k.Flush(); err != nil {
		return nil, err
	}
	if len(k.replies) == 0 {
		return nil, errors.New("harness: Receive without a pending reply")
	}
	v := k.replies[0]
	k.replies = k.replies[1:]
	if e, ok := v.(redis.Error); ok {
		return nil, e
	}
	return v, nil
}

// ReceiveContext is Receive; the context is not needed for queued replies.
func (k *conn) ReceiveContext(ctx context.Context) (any, error) { return k.Receive() }

// DoContext sends one command once the scheduler grants it.
func (k *conn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	r, c, node := k.src.r, k.src.c, k.src.node
	if k.closed {
		return nil, errors.New("harness: connection closed")
	}
	if cmd == "" && len(k.sends) == 0 {
		return nil, nil
	}
	if k.freeEval && cmd == "EVAL" {
		// The EVAL redigo sends after NOSCRIPT belongs to the step of the
		// EVALSHA: step counts do not depend on the script cache.
		k.freeEval = false
		v, err := k.exec(cmd, args)
		r.mu.Lock()
		if k.lastEvent(c) != nil {
			k.lastEvent(c).Extra = fmtArgs(cmd, args)
			k.lastEvent(c).Reply = fmtReply(v, err)
		}
		r.mu.Unlock()
		return v, err
	}
	label := cmd
	if cmd == "" || len(k.sends) > 0 {
		label = "pipeline"
	}
	q, err := r.submit(ctx, c, &k.own, node, label, args, "")
	if err != nil {
		return nil, err
	}
	// The release check: a command of a release that runs while another
	// client holds the lock is watched for deleting that client's key.
	var watch *client
	var before any
	r.mu.Lock()
	down := r.down[node-1] || c.isolated
	if c.inRelease {
		for _, o := range r.cls {
			if o != c && o.holding && !o.crashed && !o.inRelease {
				watch = o
			}
		}
	}
	r.mu.Unlock()
	if down {
		err = fmt.Errorf("%w: n%d", errUnreachable, node)
		r.reply(q, nil, err)
		return nil, err
	}
	if watch != nil {
		before, _ = r.probeKey(node)
	}
	var v any
	if label == "pipeline" {
		v, err = k.pipeline(cmd, args)
	} else {
		v, err = k.exec(cmd, args)
	}
	if err != nil && isNoScript(err) && cmd == "EVALSHA" {
		k.freeEval = true
	}
	r.reply(q, v, err)
	if watch != nil {
		after, _ := r.probeKey(node)
		bs, _ := redis.String(before, nil)
		as, _ := redis.String(after, nil)
		r.mu.Lock()
		if before != nil && bs == watch.lease.Token && (after == nil || as != bs) && watch.holding {
			r.hist.WrongRelease = append(r.hist.WrongRelease, WrongRelease{Client: c.id, Victim: watch.id, Step: r.hist.Events[q.event].Step, Node: node})
			r.hist.Events[q.event].Notes = append(r.hist.Events[q.event].Notes, fmt.Sprintf("c%d deleted c%d's lock", c.id, watch.id))
		}
		r.mu.Unlock()
	}
	return v, err
}

func (k *conn) lastEvent(c *client) *Event {
	if c.lastEvent < 0 || c.lastEvent >= len(k.src.r.hist.Events) {
		return nil
	}
	return &k.src.r.hist.Events[c.lastEvent]
}

func (k *conn) realConn() (redis.Conn, error) {
	if k.real == nil {
		c, err := k.src.r.slot.pool(k.src.node - 1).GetContext(k.src.r.ctx)
		if err != nil {
			if c != nil {
				c.Close()
			}
			return nil, err
		}
		k.real = c
	}
	return k.real, nil
}

func (k *conn) exec(cmd string, args []any) (any, error) {
	rc, err := k.realConn()
	if err != nil {
		return nil, err
	}
	return rc.Do(cmd, args...)
}

func (k *conn) pipeline(cmd string, args []any) (any, error) {
	rc, err := k.realConn()
	if err != nil {
		return nil, err
	}
	sends := k.sends
	k.sends = nil
	for _, s := range sends {
		if err := rc.Send(s[0].(string), s[1:]...); err != nil {
			return nil, err
		}
	}
	if cmd == "" {
		return rc.Do("")
	}
	return rc.Do(cmd, args...)
}

func isNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re) >= 8 && string(re[:8]) == "NOSCRIPT"
}

// reply records a granted command's answer in its event.
func (r *run) reply(q *request, v any, err error) {
	r.mu.Lock()
	e := &r.hist.Events[q.event]
	e.Reply = fmtReply(v, err)
	q.c.changed = time.Now()
	if r.spec.multi {
		// Fan-out goroutines may keep their connection open: count them as
		// idle once the answer is in; the quiet period covers the rest.
		if q.owner.active {
			q.owner.active = false
			q.c.active--
		}
	}
	r.mu.Unlock()
	r.notify()
}

// probeKey reads the lock key on node (1-based) outside the schedule.
func (r *run) probeKey(node int) (any, error) {
	c, err := r.slot.pool(node - 1).GetContext(r.ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Do("GET", r.spec.key)
}

// --- the scheduler side ---------------------------------------------------------

// settledLocked reports whether every client has reached its next step or
// its end; wait is how long to wait for a quiet period when that is what
// is missing.
func (r *run) settledLocked(now time.Time) (bool, time.Duration) {
	var wait time.Duration
	ok := true
	for _, c := range r.cls {
		if c.done || c.crashed {
			continue
		}
		if c.active > 0 || len(c.pending) == 0 {
			ok = false
			continue
		}
		if !r.spec.multi {
			continue
		}
		if len(c.pending) >= len(r.slot.nodes) || slices.ContainsFunc(c.pending, func(q *request) bool { return q.node == 0 }) {
			continue
		}
		if d := r.spec.quiet - now.Sub(c.changed); d > 0 {
			ok = false
			wait = max(wait, d)
		}
	}
	return ok, wait
}

func (r *run) settle() error {
	deadline := time.Now().Add(20 * time.Second)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		r.mu.Lock()
		ok, wait := r.settledLocked(now)
		err := r.err
		r.mu.Unlock()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if now.After(deadline) {
			return errors.New("a client neither sent a command nor finished within 20s (does the strategy sleep or block outside Redis?)")
		}
		if wait <= 0 {
			wait = time.Second
		}
		timer.Reset(wait)
		select {
		case <-r.wake:
		case <-timer.C:
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
}

// enabledLocked lists the client steps that can run now.
func (r *run) enabledLocked() []Step {
	var out []Step
	for _, c := range r.cls {
		if c.done || c.crashed || c.paused || len(c.pending) == 0 {
			continue
		}
		if len(c.pending) == 1 && (!r.spec.multi || c.pending[0].node == 0) {
			out = append(out, Step{Kind: "c", Client: c.id})
			continue
		}
		ps := slices.Clone(c.pending)
		sort.Slice(ps, func(i, j int) bool {
			return ps[i].node < ps[j].node || ps[i].node == ps[j].node && ps[i].seq < ps[j].seq
		})
		seen := map[int]bool{}
		for _, q := range ps {
			if !seen[q.node] {
				seen[q.node] = true
				out = append(out, Step{Kind: "c", Client: c.id, Node: q.node})
			}
		}
	}
	return out
}

// pickLocked finds the request a client step names.
func (r *run) pickLocked(st Step) *request {
	if st.Client < 1 || st.Client > len(r.cls) {
		return nil
	}
	c := r.cls[st.Client-1]
	if c.done || c.crashed || c.paused {
		return nil
	}
	var best *request
	for _, q := range c.pending {
		if st.Node != 0 && q.node != st.Node {
			continue
		}
		if best == nil || q.node < best.node || q.node == best.node && q.seq < best.seq {
			best = q
		}
	}
	return best
}

// grant lets a client step run. It returns false when the step names
// nothing that can run.
func (r *run) grant(st Step) bool {
	r.mu.Lock()
	q := r.pickLocked(st)
	if q == nil {
		r.mu.Unlock()
		return false
	}
	// Each step takes a tick of virtual time, so that clients that read
	// their clocks at different steps see different times (and timestamp
	// locks written at different steps differ), as on real machines. Ticks
	// are far below any TTL: only "time" events make locks expire.
	r.now += stepTick
	c := q.c
	c.pending = slices.DeleteFunc(c.pending, func(x *request) bool { return x == q })
	q.owner.active = true
	c.active++
	c.changed = time.Now()
	label := st
	if r.spec.multi && q.node != 0 {
		label.Node = q.node
	} else {
		label.Node = 0
	}
	e := Event{Step: len(r.hist.Events) + 1, Label: label.String(), Client: c.id, Node: q.node}
	if q.local != "" {
		e.Command = []string{q.local}
	} else if q.cmd == "pipeline" {
		e.Command = []string{"MULTI/pipeline"}
	} else {
		e.Command = fmtArgs(q.cmd, q.args)
	}
	r.hist.Events = append(r.hist.Events, e)
	q.event = len(r.hist.Events) - 1
	c.lastEvent = q.event
	if q.local == "acquire" || q.local == "release" {
		c.merge = q.event
	}
	r.steps = append(r.steps, label)
	r.last = c.id
	r.mu.Unlock()
	close(q.done)
	return true
}

func (r *run) crashLocked(c *client) {
	if c.crashed || c.done {
		c.crashed = true
		return
	}
	c.crashed = true
	c.info.Crashed = true
	c.holding = c.holding && true
	for _, q := range c.pending {
		q.err = errCrashed
		close(q.done)
	}
	c.pending = nil
	c.cancel()
}

// event applies an environment step.
func (r *run) event(st Step) error {
	r.mu.Lock()
	e := Event{Step: len(r.hist.Events) + 1, Label: st.String()}
	var c *client
	if st.Client > 0 {
		if st.Client > len(r.cls) {
			r.mu.Unlock()
			return fmt.Errorf("step %s: no client c%d", st, st.Client)
		}
		c = r.cls[st.Client-1]
	}
	if st.Node > len(r.slot.nodes) {
		r.mu.Unlock()
		return fmt.Errorf("step %s: no node n%d (the run has %d)", st, st.Node, len(r.slot.nodes))
	}
	switch st.Kind {
	case "crash":
		r.crashLocked(c)
		e.Notes = append(e.Notes, fmt.Sprintf("c%d crashed", c.id))
	case "pause":
		c.paused = true
	case "resume":
		c.paused = false
	case "isolate":
		c.isolated = true
	case "rejoin":
		c.isolated = false
	case "skew":
		c.skew += st.Dur
		e.Notes = append(e.Notes, fmt.Sprintf("c%d's clock is off by %s", c.id, signed(c.skew)))
	}
	r.hist.Events = append(r.hist.Events, e)
	idx := len(r.hist.Events) - 1
	r.steps = append(r.steps, st)
	r.mu.Unlock()
	if st.Kind == "crash" {
		r.notify()
	}
	var err error
	switch st.Kind {
	case "time":
		d := st.Dur
		if d == 0 {
			d = r.spec.ttl + 2*time.Second
		}
		err = r.advance(d)
	case "expire":
		var n int
		n, err = ExpireTTLs(r.ctx, r.slot.pool(st.Node-1))
		r.mu.Lock()
		r.hist.Events[idx].Notes = append(r.hist.Events[idx].Notes, fmt.Sprintf("n%d's clock jumps: %d key(s) expired", st.Node, n))
		r.mu.Unlock()
	case "kill", "restart", "npause", "nresume", "partition", "heal", "failover":
		err = r.nodeFault(st)
	}
	return err
}

// advance moves virtual time forward by d on every clock and node.
func (r *run) advance(d time.Duration) error {
	r.mu.Lock()
	r.now += d
	down := slices.Clone(r.down)
	r.mu.Unlock()
	for i := range r.slot.nodes {
		if down[i] {
			continue
		}
		if _, err := AdvanceTTLs(r.ctx, r.slot.pool(i), d); err != nil {
			return fmt.Errorf("advancing time on %s: %w", r.slot.nodes[i].Name(), err)
		}
	}
	return nil
}

func (r *run) nodeFault(st Step) error {
	n := r.slot.nodes[st.Node-1]
	unsupported := fmt.Errorf("step %s: node %s does not support this fault", st, n.Name())
	var err error
	setDown := func(v bool) {
		r.mu.Lock()
		r.down[st.Node-1] = v
		r.mu.Unlock()
	}
	switch st.Kind {
	case "kill":
		k, ok := n.(nodeKiller)
		if !ok {
			return unsupported
		}
		err = k.Kill(r.ctx)
		setDown(true)
		r.slot.reset(st.Node - 1)
	case "restart":
		k, ok := n.(nodeRestarter)
		if !ok {
			return unsupported
		}
		err = k.Restart(r.ctx, st.Keep)
		r.slot.reset(st.Node - 1)
		setDown(false)
	case "npause", "nresume":
		k, ok := n.(nodePauser)
		if !ok {
			return unsupported
		}
		if st.Kind == "npause" {
			err = k.Pause(r.ctx)
		} else {
			err = k.Resume(r.ctx)
		}
		setDown(st.Kind == "npause")
	case "partition", "heal":
		k, ok := n.(nodePartitioner)
		if !ok {
			return unsupported
		}
		if st.Kind == "partition" {
			err = k.Partition(r.ctx)
		} else {
			err = k.Heal(r.ctx)
		}
		setDown(st.Kind == "partition")
	case "failover":
		k, ok := n.(interface{ Failover(context.Context) error })
		if !ok {
			return unsupported
		}
		err = k.Failover(r.ctx)
		r.slot.reset(st.Node - 1)
	}
	return err
}

// recordKeys stores the lock key's value on every node in the last event.
func (r *run) recordKeys() {
	r.mu.Lock()
	if len(r.hist.Events) == 0 {
		r.mu.Unlock()
		return
	}
	idx := len(r.hist.Events) - 1
	down := slices.Clone(r.down)
	r.mu.Unlock()
	keys := make([]string, len(r.slot.nodes))
	for i := range r.slot.nodes {
		if down[i] {
			keys[i] = "(down)"
			continue
		}
		v, err := r.probeKey(i + 1)
		switch {
		case err != nil:
			keys[i] = "?"
		case v == nil:
			keys[i] = "-"
		default:
			keys[i] = fmtValue(v)
		}
	}
	r.mu.Lock()
	r.hist.Events[idx].Keys = keys
	r.mu.Unlock()
}

// defaultStep is the schedule after an explicit prefix runs out: keep
// running the client that ran last while it can (no preemption), else the
// lowest-numbered one; resume a paused client when nothing else can run.
func (r *run) defaultStepLocked(enabled []Step) (Step, bool) {
	for _, st := range enabled {
		if st.Client == r.last {
			return st, true
		}
	}
	if len(enabled) > 0 {
		return enabled[0], true
	}
	for _, c := range r.cls {
		if c.paused && !c.done && !c.crashed {
			return Step{Kind: "resume", Client: c.id}, true
		}
	}
	return Step{}, false
}

// execute performs the run, asking choose for every step.
func (r *run) execute(choose chooser) (*History, error) {
	defer r.stop()
	if r.spec.prepare {
		for i, n := range r.slot.nodes {
			if p, ok := n.(interface{ Prepare(context.Context) error }); ok {
				if err := p.Prepare(r.ctx); err != nil {
					return nil, fmt.Errorf("preparing %s: %w", n.Name(), err)
				}
				r.slot.reset(i)
			}
		}
	}
	if err := r.slot.flush(r.ctx); err != nil {
		return nil, err
	}
	for _, p := range r.spec.programs {
		if _, err := r.addClient(p, false); err != nil {
			return nil, err
		}
	}
	if err := r.loopSteps(choose, r.spec.maxSteps); err != nil {
		return nil, err
	}
	if r.spec.property == NoDeadlock || r.spec.property == NoStarvation {
		if err := r.livenessProbe(); err != nil {
			return nil, err
		}
	}
	r.stop()
	r.finish()
	return r.hist, nil
}

func (r *run) loopSteps(choose chooser, maxSteps int) error {
	for {
		if err := r.settle(); err != nil {
			return err
		}
		if r.spec.record {
			r.recordKeys()
		}
		r.mu.Lock()
		if len(r.hist.Events) > 0 {
			r.hist.Events[len(r.hist.Events)-1].Holders = r.holdersLocked()
		}
		n := len(r.hist.Events)
		enabled := r.enabledLocked()
		r.mu.Unlock()
		if r.spec.stopEarly && r.violatedSoFar() {
			return nil
		}
		if n >= maxSteps {
			r.mu.Lock()
			more := len(enabled) > 0
			r.mu.Unlock()
			r.hist.Truncated = more
			return nil
		}
		st, ok := choose(r, enabled)
		if !ok {
			return nil
		}
		if st.IsClient() {
			if !r.grant(st) {
				return fmt.Errorf("step %d (%s): nothing to run (enabled: %s)", n+1, st, Schedule(enabled))
			}
			continue
		}
		if err := r.event(st); err != nil {
			return err
		}
	}
}

// violatedSoFar checks the run's safety property on the history so far.
func (r *run) violatedSoFar() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.spec.property {
	case MutualExclusion:
		return CheckMutualExclusion(r.hist).Failed()
	case ReleaseSafety:
		return len(r.hist.WrongRelease) > 0
	case Fencing:
		return CheckFencing(r.hist).Failed()
	}
	return false
}

// livenessProbe lets every client finish, lets the TTL pass with nobody
// trying, and asks a fresh client to acquire once.
func (r *run) livenessProbe() error {
	def := func(r *run, enabled []Step) (Step, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.defaultStepLocked(enabled)
	}
	if err := r.loopSteps(def, len(r.hist.Events)+200); err != nil {
		return err
	}
	if err := r.event(Step{Kind: "time", Dur: 2*r.spec.ttl + 2*time.Second}); err != nil {
		return err
	}
	p, err := r.addClient(Program{{Kind: OpAcquire, Attempts: 1}}, true)
	if err != nil {
		return err
	}
	if err := r.loopSteps(def, len(r.hist.Events)+200); err != nil {
		return err
	}
	r.mu.Lock()
	got := p.info.Acquired > 0
	r.hist.Probe = &got
	r.mu.Unlock()
	return nil
}

// stop ends every client still running and waits for their loops.
func (r *run) stop() {
	r.mu.Lock()
	for _, c := range r.cls {
		if !c.done {
			for _, q := range c.pending {
				q.err = errStopped
				close(q.done)
			}
			c.pending = nil
			c.done = true
			c.cancel()
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *run) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hist.Schedule = r.steps.String()
	for _, c := range r.cls {
		c.info.Crashed = c.crashed
		r.hist.Clients = append(r.hist.Clients, c.info)
	}
	v := Check(r.hist, r.spec.property, r.spec.waiter)
	r.hist.Verdict = v
	if v.Failed() && v.Step > 0 && v.Step <= len(r.hist.Events) {
		r.hist.Events[v.Step-1].Violation = string(v.Property)
	}
}
