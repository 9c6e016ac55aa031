// The API's handlers: the levels, and a session's life from its start through
// its steps, undos and resets to its end.

package play

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/locklab/locklab/harness"
)

func (s *Server) levels(w http.ResponseWriter, r *http.Request) {
	ls := slices.Clone(s.all)
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
		q.Level = s.all[0].ID
	}
	l, ok := find(s.all, q.Level)
	if !ok {
		fail(w, http.StatusBadRequest, fmt.Sprintf("unknown level %q", q.Level))
		return
	}
	if l.Unavailable != "" {
		fail(w, http.StatusUnprocessableEntity, fmt.Sprintf("level %s is unavailable: %s", l.ID, l.Unavailable))
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
			if l, ok = find(s.all, q.Level); !ok {
				fail(w, http.StatusBadRequest, fmt.Sprintf("unknown level %q", q.Level))
				return
			}
			if l.Unavailable != "" {
				fail(w, http.StatusUnprocessableEntity, fmt.Sprintf("level %s is unavailable: %s", l.ID, l.Unavailable))
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
