// An interactive run is a run whose scheduler is a person: it stops before
// every step, says what each client would send next and which faults may
// strike, and runs the one step it is given. Its state after each step is a
// History like any other run's, checked live by the safety checkers.

package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// InteractiveOptions start an interactive run.
type InteractiveOptions struct {
	Case Case
	// Nodes: at least the scenario's count.
	Nodes []Node
	// DB is the database used on every node.
	DB int
	// Prefix is a schedule replayed on fresh state before the run waits for
	// its first step (undo is a replay of every step but the last).
	Prefix string
	// Seed seeds the clients' token sources.
	Seed uint64
	// MaxSteps bounds the run (default 100).
	MaxSteps int
}

// ErrBadStep is wrapped by the error of a step that cannot run now: an
// unknown step, a client with nothing to do, a fault the scenario does not
// allow or has used up. The run is unchanged.
var ErrBadStep = errors.New("step cannot run now")

// ErrRunOver is returned by Step once the run has ended.
var ErrRunOver = errors.New("the run is over")

// NextStep is a step a client can take now.
type NextStep struct {
	// Step is its text form: "c1", or "c1@n2" for one of several commands
	// a multi-node client has outstanding.
	Step   string `json:"step"`
	Client int    `json:"client"`
	Node   int    `json:"node,omitempty"`
	// Command is the Redis command and arguments it sends, or the local
	// action ("acquire", "write", "release", "sleep 32s"). The first Redis
	// command of a single-node acquire or release runs in the step of that
	// action: it is not known before.
	Command []string `json:"command"`
	Local   bool     `json:"local,omitempty"`
}

// PlayClient is one client's state between two steps.
type PlayClient struct {
	ID       int        `json:"id"`
	Program  string     `json:"program"`
	Holding  bool       `json:"holding"`
	Done     bool       `json:"done"`
	Crashed  bool       `json:"crashed"`
	Paused   bool       `json:"paused"`
	Isolated bool       `json:"isolated"`
	Skew     string     `json:"skew,omitempty"`
	Next     []NextStep `json:"next"`
}

// InteractiveState is an interactive run between two steps.
type InteractiveState struct {
	// Steps is how many steps were played (replayed or given to Step);
	// Schedule is them in the text form. The steps the harness adds once the
	// run is over (the liveness probe) are in History.Schedule only.
	Steps    int    `json:"steps"`
	Schedule string `json:"schedule"`
	// History is the run so far: events with the key's value on every node
	// after each, acquisitions, writes, wrong releases.
	History *History     `json:"history"`
	Clients []PlayClient `json:"clients"`
	// Faults are the fault steps the scenario still allows.
	Faults []string `json:"faults"`
	// Live are the safety checkers' verdicts on the history so far
	// (mutual exclusion, release safety, fencing).
	Live []Verdict `json:"live"`
	// Done: the run has ended; History.Verdict is the final verdict,
	// liveness included.
	Done bool `json:"done"`
	// Err is why the run stopped, when it failed.
	Err string `json:"error,omitempty"`
}

// Violation returns the first failed verdict of the state: the final one
// when the run is over, else a live one.
func (s *InteractiveState) Violation() (Verdict, bool) {
	if s.Done && s.History != nil && s.History.Verdict.Failed() {
		return s.History.Verdict, true
	}
	for _, v := range s.Live {
		if v.Failed() {
			return v, true
		}
	}
	return Verdict{}, false
}

// Interactive is a running interactive run. Its methods are safe for
// concurrent use; steps are applied one at a time.
type Interactive struct {
	cancel context.CancelFunc
	done   chan struct{}
	reqs   chan stepReq

	mu    sync.Mutex
	state InteractiveState
	over  bool
	// step serializes Step calls.
	step sync.Mutex
}

type stepReq struct {
	st    Step
	reply chan error
}

// StartInteractive starts an interactive run on fresh state, replays
// o.Prefix, and returns once the run waits for a step (or has ended).
func StartInteractive(ctx context.Context, o InteractiveOptions) (*Interactive, error) {
	if err := o.Case.check(o.Nodes); err != nil {
		return nil, err
	}
	sc, spec := o.Case.Scenario, o.Case.spec()
	prefix, err := ParseSchedule(o.Prefix)
	if err != nil {
		return nil, err
	}
	alphabet, err := sc.alphabet()
	if err != nil {
		return nil, err
	}
	spec.seed = o.Seed
	spec.record = true
	spec.maxSteps = 100
	if o.MaxSteps > 0 {
		spec.maxSteps = o.MaxSteps
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Interactive{cancel: cancel, done: make(chan struct{}), reqs: make(chan stepReq)}
	pl := &player{p: p, ctx: rctx, prefix: prefix, alphabet: alphabet, maxFaults: sc.MaxFaults, first: make(chan error, 1)}
	go pl.play(spec, o)
	select {
	case err := <-pl.first:
		if err != nil {
			p.Close()
			return nil, err
		}
	case <-ctx.Done():
		p.Close()
		return nil, ctx.Err()
	}
	p.mu.Lock()
	failed := p.over && p.state.Err != ""
	msg := p.state.Err
	p.mu.Unlock()
	if failed {
		p.Close()
		if o.Prefix != "" {
			return nil, fmt.Errorf("replaying %q: %s", o.Prefix, msg)
		}
		return nil, errors.New(msg)
	}
	return p, nil
}

// player chooses the steps of an Interactive's run: its prefix's, then
// the player's, each asked for through p.reqs once a snapshot of the run
// is published.
type player struct {
	p         *Interactive
	ctx       context.Context // the run's: canceled by Close
	prefix    Schedule
	alphabet  []Step
	maxFaults int
	first     chan error // the first answer: StartInteractive waits for it
	pending   chan error // the reply of the step being run
	played    int        // steps chosen by the prefix or the player
	answered  bool
}

// answer replies err to the step being run, if any, and to
// StartInteractive the first time.
func (pl *player) answer(err error) {
	if pl.pending != nil {
		pl.pending <- err
		pl.pending = nil
	}
	if !pl.answered {
		pl.answered = true
		pl.first <- err
	}
}

// choose is the run's chooser: the prefix's next step, checked; the
// default step where none is enabled; else the player's, once the run's
// snapshot is published and the previous step answered.
func (pl *player) choose(r *run, enabled []Step) (Step, bool) {
	r.mu.Lock()
	if i := len(r.steps); i < len(pl.prefix) {
		st := pl.prefix[i]
		err := checkStep(r, st, pl.alphabet, pl.maxFaults)
		r.mu.Unlock()
		if err != nil {
			r.fail(fmt.Errorf("step %d of the prefix (%s): %w", i+1, st, err))
			return Step{}, false
		}
		pl.played = i + 1
		return st, true
	}
	if len(enabled) == 0 {
		def, ok := r.defaultStepLocked(enabled)
		r.mu.Unlock()
		return def, ok
	}
	st := snapshotLocked(r, enabled, pl.alphabet, pl.maxFaults)
	r.mu.Unlock()
	pl.p.mu.Lock()
	pl.p.state = st
	pl.p.mu.Unlock()
	pl.answer(nil)
	for {
		select {
		case q := <-pl.p.reqs:
			r.mu.Lock()
			err := checkStep(r, q.st, pl.alphabet, pl.maxFaults)
			r.mu.Unlock()
			if err != nil {
				q.reply <- err
				continue
			}
			pl.pending = q.reply
			pl.played = len(r.steps) + 1
			return q.st, true
		case <-pl.ctx.Done():
			return Step{}, false
		}
	}
}

// play runs the case of o on a slot of its own, the steps chosen by
// choose, then publishes the final state (the last snapshot with the
// error, where the run failed) and closes p.done.
func (pl *player) play(spec runSpec, o InteractiveOptions) {
	p := pl.p
	defer close(p.done)
	var (
		h   *History
		r   *run
		err error
	)
	sl, err := newSlot(o.Case.nodesFor(o.Nodes), o.DB, o.Case.Strategy.Name, pl.prefix, pl.alphabet)
	if err == nil {
		r = newRun(pl.ctx, spec, sl)
		h, err = r.execute(pl.choose)
		if cerr := sl.close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	final := InteractiveState{Done: true}
	if err == nil && r.err != nil {
		err = r.err
	}
	if err != nil {
		// The history so far, as the last snapshot had it.
		p.mu.Lock()
		final = p.state
		p.mu.Unlock()
		final.Done = true
		final.Err = err.Error()
	} else {
		final = finalState(h, r.steps[:min(pl.played, len(r.steps))])
	}
	p.mu.Lock()
	p.state, p.over = final, true
	p.mu.Unlock()
	pl.answer(nil)
}

// State returns the run's state now.
func (p *Interactive) State() InteractiveState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Step runs one step, given in the schedule text form ("c1", "c2@n3",
// "time", "crash(c1)"), and returns the state after it. A step that cannot
// run returns an error wrapping ErrBadStep and changes nothing; after the
// run has ended, ErrRunOver.
func (p *Interactive) Step(ctx context.Context, text string) (InteractiveState, error) {
	st, err := parseStep(text)
	if err != nil {
		return p.State(), fmt.Errorf("%w: %v", ErrBadStep, err)
	}
	p.step.Lock()
	defer p.step.Unlock()
	p.mu.Lock()
	over := p.over
	p.mu.Unlock()
	if over {
		return p.State(), ErrRunOver
	}
	q := stepReq{st: st, reply: make(chan error, 1)}
	select {
	case p.reqs <- q:
	case <-p.done:
		return p.State(), ErrRunOver
	case <-ctx.Done():
		return p.State(), ctx.Err()
	}
	// The reply comes once the step has run and the run waits again (or
	// ended), or at once when the step was refused. The step runs to its
	// end even when ctx ends meanwhile: a run is never left mid-step.
	if err := <-q.reply; err != nil {
		return p.State(), err
	}
	return p.State(), nil
}

// Close ends the run and waits until its clients have stopped.
func (p *Interactive) Close() {
	p.cancel()
	<-p.done
}

// checkStep returns why st cannot run now, or nil.
func checkStep(r *run, st Step, alphabet []Step, maxFaults int) error {
	if st.IsClient() {
		if n := len(r.cls); st.Client > n {
			if n == 1 {
				return fmt.Errorf("%w: %s: this scenario has one client, c1", ErrBadStep, st)
			}
			return fmt.Errorf("%w: %s: this scenario has %d clients, c1 to c%d", ErrBadStep, st, n, n)
		}
		if r.pickLocked(st) == nil {
			switch c := r.cls[st.Client-1]; {
			case c.crashed:
				return fmt.Errorf("%w: %s has crashed: it has nothing to run", ErrBadStep, st)
			case c.done:
				return fmt.Errorf("%w: %s has run its whole program: it has nothing to run", ErrBadStep, st)
			case c.paused:
				return fmt.Errorf("%w: %s is paused: it has nothing to run until it resumes", ErrBadStep, st)
			}
			return fmt.Errorf("%w: %s has nothing to run now", ErrBadStep, st)
		}
		return nil
	}
	if !slices.Contains(faultsLeftLocked(r, alphabet, maxFaults), st.String()) {
		return fmt.Errorf("%w: %s is not a fault this scenario allows now", ErrBadStep, st)
	}
	return nil
}

// faultsLeftLocked lists the faults of the alphabet not used up: each at
// most as often as it is listed, maxFaults in all.
func faultsLeftLocked(r *run, alphabet []Step, maxFaults int) []string {
	used := 0
	for _, s := range r.steps {
		if slices.Contains(alphabet, s) {
			used++
		}
	}
	out := []string{}
	if used >= maxFaults {
		return out
	}
	for _, f := range alphabet {
		n := 0
		for _, s := range r.steps {
			if s == f {
				n++
			}
		}
		if n < alphabetCount(alphabet, f) && !slices.Contains(out, f.String()) {
			out = append(out, f.String())
		}
	}
	return out
}

// snapshotLocked copies the run's state for the player.
func snapshotLocked(r *run, enabled []Step, alphabet []Step, maxFaults int) InteractiveState {
	h := copyHistory(r.hist)
	h.Schedule = r.steps.String()
	st := InteractiveState{Steps: len(r.steps), Schedule: h.Schedule, History: h,
		Faults: faultsLeftLocked(r, alphabet, maxFaults)}
	for _, c := range r.cls {
		h.Clients = append(h.Clients, c.info)
		pc := PlayClient{ID: c.id, Program: c.prog.String(), Holding: c.holding, Done: c.done,
			Crashed: c.crashed, Paused: c.paused, Isolated: c.isolated, Next: []NextStep{}}
		if c.skew != 0 {
			pc.Skew = signed(c.skew)
		}
		for _, e := range enabled {
			if e.Client != c.id {
				continue
			}
			q := r.pickLocked(e)
			if q == nil {
				continue
			}
			pc.Next = append(pc.Next, NextStep{Step: e.String(), Client: c.id, Node: q.node,
				Command: q.command(), Local: q.local != ""})
		}
		st.Clients = append(st.Clients, pc)
	}
	st.Live = liveVerdicts(h)
	h.Verdict = Verdict{Outcome: Safe, Property: r.spec.property, Message: "nothing broken so far"}
	for _, v := range st.Live {
		if v.Failed() {
			h.Verdict = v
			break
		}
	}
	return st
}

// liveVerdicts runs the safety checkers on h and marks the step of each
// violation.
func liveVerdicts(h *History) []Verdict {
	vs := []Verdict{checkMutualExclusion(h), checkRelease(h), checkFencing(h)}
	for _, v := range vs {
		markViolation(h, v)
	}
	return vs
}

// finalState is the state of a run that has ended; played are the steps the
// prefix and the player chose (the liveness probe's come after them).
func finalState(h *History, played Schedule) InteractiveState {
	h = copyHistory(h)
	st := InteractiveState{Steps: len(played), Schedule: played.String(), History: h, Done: true,
		Faults: []string{}}
	for _, c := range h.Clients {
		st.Clients = append(st.Clients, PlayClient{ID: c.ID, Program: c.Program, Done: true, Crashed: c.Crashed, Next: []NextStep{}})
	}
	st.Live = liveVerdicts(h)
	return st
}

// copyHistory copies h deeply enough that the run can go on appending.
func copyHistory(h *History) *History {
	c := *h
	c.Events = make([]Event, len(h.Events))
	for i, e := range h.Events {
		e.Command = slices.Clone(e.Command)
		e.Extra = slices.Clone(e.Extra)
		e.Notes = slices.Clone(e.Notes)
		e.Holders = slices.Clone(e.Holders)
		e.Keys = slices.Clone(e.Keys)
		c.Events[i] = e
	}
	c.Nodes = slices.Clone(h.Nodes)
	c.Clients = slices.Clone(h.Clients)
	c.Acquisitions = slices.Clone(h.Acquisitions)
	c.Writes = slices.Clone(h.Writes)
	c.WrongRelease = slices.Clone(h.WrongRelease)
	c.Skipped = slices.Clone(h.Skipped)
	return &c
}
