// Package play serves "locklab play": a page in the browser where the
// participant is the scheduler. Each client of a scenario is a column with a
// button showing the exact Redis command it sends next; each click runs that
// one command on real Redis servers through the harness, the swimlane grows
// by a row with the key's value on every node, and the checkers say at once
// when two clients hold the lock, a release deletes another's lock, or a
// stale write gets through. Levels are scenarios of the catalog on one
// strategy; the browser keeps which are solved.
//
// Every participant gets a session with Redis servers of its own, so that a
// room can play against one server; idle sessions are closed, and a cap
// bounds how many run at once.
package play

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
)

//go:embed assets
var assets embed.FS

// Options configure a Server.
type Options struct {
	// Start starts the servers of one session (see ClusterServers).
	Start StartServers
	// MaxSessions caps the sessions at once (default 40).
	MaxSessions int
	// Idle closes a session after that long without a request (default
	// 10 minutes).
	Idle time.Duration
	// DocsURL is where the levels' documentation pages are, ending in "/"
	// (default: the repository's docs folder on GitHub).
	DocsURL string
	// HintSchedules bounds the exploration behind a hint (default 3000).
	HintSchedules int
	// WarmHints explores every level in the background from the start, so
	// that the first hint of a level need not wait for it.
	WarmHints bool
	// Extra levels come first in the list (see CustomLevel).
	Extra []Level
	// Log, when set, receives one line per session started or ended.
	Log io.Writer
}

// DefaultDocsURL is the default Options.DocsURL.
const DefaultDocsURL = "https://github.com/locklab/locklab/blob/main/docs/"

// Server is the HTTP handler of locklab play. Close ends every session.
type Server struct {
	opts Options
	m    *manager
	mux  *http.ServeMux

	hintMu sync.Mutex
	hints  map[string]*hint
	// ctx ends with Close: it bounds the explorations behind hints.
	ctx      context.Context
	stop     context.CancelFunc
	warmDone chan struct{}
}

// hint is a counterexample of a level.
type hint struct {
	Schedule  []string
	Outcome   harness.Outcome
	Schedules int
	Complete  bool
}

// New returns a Server.
func New(o Options) (*Server, error) {
	if o.Start == nil {
		return nil, errors.New("play: Options.Start is required")
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 40
	}
	if o.Idle <= 0 {
		o.Idle = 10 * time.Minute
	}
	if o.DocsURL == "" {
		o.DocsURL = DefaultDocsURL
	}
	if o.HintSchedules <= 0 {
		o.HintSchedules = 3000
	}
	s := &Server{opts: o, m: newManager(o.Start, o.MaxSessions, o.Idle), hints: map[string]*hint{}}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		b, _ := assets.ReadFile("assets/index.html")
		w.Write(b)
	})
	mux.HandleFunc("GET /api/levels", s.levels)
	mux.HandleFunc("POST /api/sessions", s.create)
	mux.HandleFunc("GET /api/state", s.state)
	mux.HandleFunc("POST /api/step", s.step)
	mux.HandleFunc("POST /api/undo", s.undo)
	mux.HandleFunc("POST /api/reset", s.reset)
	mux.HandleFunc("POST /api/hint", s.hint)
	mux.HandleFunc("POST /api/end", s.end)
	s.mux = mux
	s.warmDone = make(chan struct{})
	s.ctx, s.stop = context.WithCancel(context.Background())
	ctx := s.ctx
	go func() {
		defer close(s.warmDone)
		if !o.WarmHints {
			return
		}
		for _, l := range s.all() {
			if _, err := s.counterexample(ctx, l); err != nil && ctx.Err() == nil {
				s.logf("exploring level %s for hints: %v", l.ID, err)
			}
		}
	}()
	return s, nil
}

// ServeHTTP serves the page and its API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			fail(w, http.StatusInternalServerError, fmt.Sprintf("internal error: %v", v))
		}
	}()
	w.Header().Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// all lists the levels: the extra ones, then the built-in ones.
func (s *Server) all() []Level {
	return append(append([]Level(nil), s.opts.Extra...), Levels()...)
}

// Sessions is how many sessions are open.
func (s *Server) Sessions() int { return s.m.count() }

// Close ends every session and removes its servers.
func (s *Server) Close() {
	s.stop()
	<-s.warmDone
	// Wait for an exploration a hint started: it holds hintMu, sees ctx end
	// and removes its servers.
	s.hintMu.Lock()
	//lint:ignore SA2001 taking the lock is the wait
	s.hintMu.Unlock()
	s.m.close()
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Log != nil {
		fmt.Fprintf(s.opts.Log, time.Now().Format("15:04:05 ")+format+"\n", args...)
	}
}

// --- requests and answers ---------------------------------------------------

type request struct {
	Session string `json:"session"`
	Level   string `json:"level"`
	Seq     *int   `json:"seq"`
	Step    string `json:"step"`
	Prefix  string `json:"prefix"`
}

// response is a session's state after a request.
type response struct {
	Session string                   `json:"session"`
	Level   Level                    `json:"level"`
	Seq     int                      `json:"seq"`
	State   harness.InteractiveState `json:"state"`
	Solved  bool                     `json:"solved"`
	// Violation is the first property broken, live or final.
	Violation *harness.Verdict `json:"violation,omitempty"`
	// Replay is the command that replays the run so far.
	Replay   string `json:"replay"`
	Timeline string `json:"timeline"`
	Message  string `json:"message,omitempty"`
}

type apiError struct {
	Error string    `json:"error"`
	State *response `json:"state,omitempty"`
}

func fail(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// decode reads a small JSON body into q, answering 400 when it is not one.
func decode(w http.ResponseWriter, r *http.Request, q *request) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(q); err != nil {
		fail(w, http.StatusBadRequest, "malformed request body: "+err.Error())
		return false
	}
	if dec.More() {
		fail(w, http.StatusBadRequest, "malformed request body: more than one JSON value")
		return false
	}
	return true
}

func (s *Server) answer(sess *session, st harness.InteractiveState) response {
	l := sess.level
	out := response{Session: sess.id, Level: s.withDocs(l), Seq: st.Steps, State: st, Solved: l.solved(&st)}
	if v, bad := st.Violation(); bad {
		out.Violation = &v
	}
	out.Replay = fmt.Sprintf("locklab demo %s --strategy %s --schedule '%s'", l.Scenario, l.Strategy, st.Schedule)
	if st.History != nil {
		out.Timeline = render.Timeline(st.History)
	}
	switch {
	case st.Err != "":
		out.Message = "the run stopped: " + st.Err
	case l.Safe && out.Solved:
		out.Message = "Nothing broke. " + l.Why
	}
	return out
}

func (s *Server) withDocs(l Level) Level {
	l.Docs = s.opts.DocsURL + l.Docs
	return l
}

// session finds the request's session, answering 404 when there is none.
func (s *Server) session(w http.ResponseWriter, id string) (*session, bool) {
	if id == "" {
		fail(w, http.StatusBadRequest, `missing "session"`)
		return nil, false
	}
	sess, ok := s.m.get(id)
	if !ok {
		fail(w, http.StatusNotFound, "no such session (it may have been closed after being idle): start a new one")
		return nil, false
	}
	return sess, true
}

// locked runs f with the session locked, answering 404 when it has ended
// meanwhile.
func (s *Server) locked(w http.ResponseWriter, q request, f func(sess *session)) {
	sess, ok := s.session(w, q.Session)
	if !ok {
		return
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed || sess.run == nil {
		fail(w, http.StatusNotFound, "the session has ended: start a new one")
		return
	}
	f(sess)
}

// checkSeq answers 409 with the current state when the client's idea of
// how many steps have run is not the server's: a repeated or crossed
// request never runs a step twice.
func (s *Server) checkSeq(w http.ResponseWriter, sess *session, q request) bool {
	if q.Seq == nil {
		fail(w, http.StatusBadRequest, `missing "seq": the number of steps run so far, as the last answer gave it`)
		return false
	}
	st := sess.run.State()
	if *q.Seq != st.Steps {
		cur := s.answer(sess, st)
		writeJSON(w, http.StatusConflict, apiError{
			Error: fmt.Sprintf("stale request: it was for step %d, but %d steps have run (a repeated click?); here is the current state", *q.Seq, st.Steps),
			State: &cur})
		return false
	}
	return true
}

// --- handlers ---------------------------------------------------------------

func (s *Server) levels(w http.ResponseWriter, r *http.Request) {
	ls := s.all()
	for i := range ls {
		ls[i] = s.withDocs(ls[i])
	}
	writeJSON(w, http.StatusOK, ls)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var q request
	if !decode(w, r, &q) {
		return
	}
	if q.Level == "" {
		q.Level = s.all()[0].ID
	}
	l, ok := find(s.all(), q.Level)
	if !ok {
		fail(w, http.StatusBadRequest, fmt.Sprintf("unknown level %q", q.Level))
		return
	}
	if _, err := harness.ParseSchedule(q.Prefix); err != nil {
		fail(w, http.StatusBadRequest, "bad prefix: "+err.Error())
		return
	}
	sess, st, err := s.m.create(r.Context(), l, q.Prefix)
	switch {
	case errors.Is(err, errFull):
		fail(w, http.StatusServiceUnavailable, fmt.Sprintf(
			"the room is full: %d participants are playing, the most this server allows (--max-sessions). Try again in a few minutes, when an idle session has been closed.", s.opts.MaxSessions))
		return
	case err != nil && q.Prefix != "":
		fail(w, http.StatusUnprocessableEntity, err.Error())
		return
	case err != nil:
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.logf("session %s… started on level %s (%d open)", sess.id[:6], l.ID, s.m.count())
	writeJSON(w, http.StatusOK, s.answer(sess, st))
}

func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	s.locked(w, request{Session: r.URL.Query().Get("session")}, func(sess *session) {
		writeJSON(w, http.StatusOK, s.answer(sess, sess.run.State()))
	})
}

func (s *Server) step(w http.ResponseWriter, r *http.Request) {
	var q request
	if !decode(w, r, &q) {
		return
	}
	s.locked(w, q, func(sess *session) {
		if !s.checkSeq(w, sess, q) {
			return
		}
		if strings.TrimSpace(q.Step) == "" {
			fail(w, http.StatusBadRequest, `missing "step": "c1", "c2@n3", or a fault such as "time"`)
			return
		}
		st, err := sess.run.Step(r.Context(), q.Step)
		switch {
		case errors.Is(err, harness.ErrBadStep):
			fail(w, http.StatusBadRequest, err.Error())
		case errors.Is(err, harness.ErrRunOver):
			fail(w, http.StatusConflict, "the run is over: undo or reset to play again")
		case err != nil:
			fail(w, http.StatusInternalServerError, err.Error())
		default:
			writeJSON(w, http.StatusOK, s.answer(sess, st))
		}
	})
}

// undo replays every step but the last on fresh state.
func (s *Server) undo(w http.ResponseWriter, r *http.Request) {
	var q request
	if !decode(w, r, &q) {
		return
	}
	s.locked(w, q, func(sess *session) {
		if !s.checkSeq(w, sess, q) {
			return
		}
		sched, err := harness.ParseSchedule(sess.run.State().Schedule)
		if err != nil || len(sched) == 0 {
			fail(w, http.StatusConflict, "nothing to undo")
			return
		}
		s.reload(w, r, sess, sess.level, sched[:len(sched)-1].String())
	})
}

// reset starts the session's level, or another, over.
func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	var q request
	if !decode(w, r, &q) {
		return
	}
	s.locked(w, q, func(sess *session) {
		l := sess.level
		if q.Level != "" {
			var ok bool
			if l, ok = find(s.all(), q.Level); !ok {
				fail(w, http.StatusBadRequest, fmt.Sprintf("unknown level %q", q.Level))
				return
			}
		}
		s.reload(w, r, sess, l, "")
	})
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request, sess *session, l Level, prefix string) {
	st, err := sess.load(r.Context(), s.m, l, prefix)
	if err != nil {
		// The session has no run left: it ends.
		sess.closeLocked()
		s.m.forget(sess.id)
		fail(w, http.StatusInternalServerError, err.Error()+" (the session has ended: start a new one)")
		return
	}
	writeJSON(w, http.StatusOK, s.answer(sess, st))
}

func (s *Server) end(w http.ResponseWriter, r *http.Request) {
	var q request
	if !decode(w, r, &q) {
		return
	}
	if !s.m.remove(q.Session) {
		fail(w, http.StatusNotFound, "no such session")
		return
	}
	s.logf("session %.6s… ended (%d open)", q.Session, s.m.count())
	writeJSON(w, http.StatusOK, map[string]bool{"ended": true})
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
// own, and keeps it up to its violation: the scenario's own schedule when
// it breaks the level (one run, where exploring node faults such as a
// restart would take minutes), else the shortest the explorer finds. One
// search runs at a time.
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
	if l.cs.Scenario.Schedule != "" {
		run, err := harness.Run(ctx, harness.RunOptions{Case: l.cs, Nodes: sv.Nodes(), NoRecord: true})
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
			Nodes: sv.Nodes(), MaxSchedules: s.opts.HintSchedules, Workers: 2})
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
