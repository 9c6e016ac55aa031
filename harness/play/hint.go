// Hints: a counterexample of each level, found once on servers of its own and
// shared by every session, and the step it says to take next.

package play

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/locklab/locklab/harness"
)

// hint is a counterexample of a level.
type hint struct {
	Schedule  []string
	Outcome   harness.Outcome
	Schedules int
	Complete  bool
}

// hintAnswer is the next step of the level's counterexample.
type hintAnswer struct {
	// Next is the step to take now, when the run so far follows the
	// counterexample.
	Next string `json:"next,omitempty"`
	// Schedule is the whole counterexample, up to its violation: the
	// scenario's own schedule where it breaks the level, else the shortest
	// the explorer finds.
	Schedule string `json:"schedule,omitempty"`
	Message  string `json:"message"`
}

func (s *Server) hint(w http.ResponseWriter, r *http.Request) {
	var q request
	if !decode(w, r, &q) {
		return
	}
	sess, ok := s.session(w, q.Session)
	if !ok {
		return
	}
	sess.mu.Lock()
	l := sess.level
	var done []string
	if sess.run != nil {
		st := sess.run.State()
		done = strings.Fields(st.Schedule)
	}
	sess.mu.Unlock()
	// A tab that goes away does not stop the exploration (its result is
	// kept for everyone); Close does.
	h, err := s.counterexample(s.ctx, l)
	if err != nil {
		fail(w, http.StatusInternalServerError, "exploring: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, h.next(done))
}

// next says what to do after the steps done.
func (h *hint) next(done []string) hintAnswer {
	if len(h.Schedule) == 0 {
		bound := "all of them within the bound"
		if !h.Complete {
			bound = "not all within the bound"
		}
		return hintAnswer{Message: fmt.Sprintf("The explorer ran %d schedules (%s) and none broke this level: play it to the end and ask why.", h.Schedules, bound)}
	}
	a := hintAnswer{Schedule: strings.Join(h.Schedule, " ")}
	for i, st := range done {
		if i >= len(h.Schedule) {
			a.Message = "Your run already has every step of the counterexample: finish it."
			return a
		}
		if st != h.Schedule[i] {
			back := fmt.Sprintf("Undo back to step %d.", i)
			if i == 0 {
				back = "Reset."
			}
			a.Message = fmt.Sprintf("Your run left the counterexample at step %d: you played %s, it plays %s. %s", i+1, st, h.Schedule[i], back)
			return a
		}
	}
	if len(done) >= len(h.Schedule) {
		a.Message = "You have played the whole counterexample."
		return a
	}
	a.Next = h.Schedule[len(done)]
	a.Message = fmt.Sprintf("Step %d of the counterexample (%d steps): %s.", len(done)+1, len(h.Schedule), a.Next)
	return a
}

// counterexample finds a counterexample of level l once, on servers of its
// own, and keeps it up to its violation: the level's answer or the
// scenario's own schedule when it breaks the level (one run, where
// exploring node faults such as a restart would take minutes), else the
// shortest the explorer finds. One search runs at a time.
func (s *Server) counterexample(ctx context.Context, l Level) (*hint, error) {
	s.hintMu.Lock()
	defer s.hintMu.Unlock()
	if h, ok := s.hints[l.ID]; ok {
		return h, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	sv, err := s.opts.Start(ctx, l)
	if err != nil {
		return nil, err
	}
	defer sv.Close()
	h := &hint{}
	var ce *harness.History
	if answer := cmp.Or(l.answer, l.cs.Scenario.Schedule); answer != "" {
		run, err := harness.Run(ctx, harness.RunOptions{Case: l.cs, Nodes: sv.Nodes(), Schedule: answer, NoRecord: true})
		if err != nil {
			return nil, err
		}
		h.Schedules = 1
		if run.Verdict.Failed() {
			ce = run
		}
	}
	if ce == nil {
		res, err := harness.Explore(ctx, harness.ExploreOptions{Case: l.cs,
			Nodes: sv.Nodes(), MaxSchedules: hintBudget(l, s.opts.HintSchedules), Workers: 2})
		if err != nil {
			return nil, err
		}
		h.Schedules += res.Schedules
		h.Complete = res.Complete
		ce = res.Counterexample
	}
	if ce != nil {
		h.Outcome = ce.Verdict.Outcome
		steps := strings.Fields(ce.Schedule)
		if n := ce.Verdict.Step; n > 0 && n <= len(steps) {
			steps = steps[:n]
		}
		h.Schedule = steps
	}
	s.hints[l.ID] = h
	return h, nil
}

// hintBudget bounds the exploration behind a hint of level l: max
// schedules, and no more than the matrix's cell of another store runs
// (harness.CellSchedules: harness.StoreSchedules, fewer when the scenario
// restarts the server), where a schedule costs round trips to a database
// or a quorum.
func hintBudget(l Level, max int) int {
	if l.Store == "" {
		return max
	}
	return min(max, harness.CellSchedules(l.Store, l.cs.Scenario, harness.StoreSchedules))
}
