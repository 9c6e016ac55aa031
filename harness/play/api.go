// The API's requests and answers: the JSON a request carries and the state it
// gets back, and the checks every request passes (its body, its session and
// its place in the run).

package play

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
)

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
	// Violation is the failure that solves the level where there is one,
	// else the first property broken, live or final.
	Violation *harness.Verdict `json:"violation,omitempty"`
	// Replay is the command that replays the run so far.
	Replay   string `json:"replay"`
	Timeline string `json:"timeline"`
	// Labels says what the timeline's short names stand for.
	Labels  string `json:"labels,omitempty"`
	Message string `json:"message,omitempty"`
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
	if v, bad := l.violation(&st); bad {
		out.Violation = &v
	}
	out.Replay = fmt.Sprintf("locklab demo %s --strategy %s --schedule '%s'", l.Scenario, l.Strategy, st.Schedule)
	if st.History != nil {
		out.Timeline = render.Timeline(st.History)
		out.Labels = render.Abbreviations(l.Strategy)
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
