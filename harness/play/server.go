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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/harness"
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
	// WarmHints explores every Redis level in the background from the
	// start, so that the first hint of a level need not wait for it. A level
	// on another store is explored when its first hint is asked for: its
	// servers start only for a participant who plays it.
	WarmHints bool
	// Extra levels come first in the list (see CustomLevel).
	Extra []Level
	// Installed says whether the servers of a store other than Redis can
	// be started here (default: harness.StoreInstalled, the binaries found); a
	// level on a store without them is listed as unavailable, with the
	// error as its reason.
	Installed func(store string) error
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

	// all is every level the server offers: Options.Extra, then Levels.
	all []Level

	hintMu sync.Mutex
	hints  map[string]*hint
	// ctx ends with Close: it bounds the explorations behind hints.
	ctx      context.Context
	stop     context.CancelFunc
	warmDone chan struct{}
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
	if o.Installed == nil {
		o.Installed = harness.StoreInstalled
	}
	s := &Server{opts: o, m: newManager(o.Start, o.MaxSessions, o.Idle), hints: map[string]*hint{},
		all: append(slices.Clone(o.Extra), Levels()...)}
	if len(s.all) == 0 {
		return nil, errors.New("play: no level: no registered store has any (import the packages of the stores under stores/)")
	}
	for i, l := range s.all {
		if l.Store == "" {
			continue
		}
		if err := o.Installed(l.Store); err != nil {
			s.all[i].Unavailable = fmt.Sprintf("this level plays on %s: %v", storeTitle(l.Store), err)
		}
	}
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
		for _, l := range s.all {
			if l.Unavailable != "" || l.Store != "" {
				continue
			}
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

// Sessions is how many sessions are open: a session closed for being idle
// counts until its servers are closed.
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
