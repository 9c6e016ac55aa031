// Sessions: each participant's level, servers and interactive run, and the
// manager that creates them, caps their number and closes the idle ones.

package play

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locklab/locklab/harness"
)

// session is one participant: a level, its servers, and the interactive run
// on them. mu serializes everything done to it.
type session struct {
	id string

	mu      sync.Mutex
	level   Level
	servers Servers
	run     *harness.Interactive
	closed  bool

	// used is when the session last served a request (guarded by the
	// manager's mu).
	used time.Time
}

// errFull is returned when the session cap is reached.
var errFull = errors.New("full")

// manager holds the sessions.
type manager struct {
	start StartServers
	max   int
	idle  time.Duration
	seed  uint64
	mu    sync.Mutex
	byID  map[string]*session
	// closing counts the sessions taken out of byID whose servers are
	// still being closed: they are open until then.
	closing int
	closed  bool
	stopped chan struct{}
	wg      sync.WaitGroup
}

func newManager(start StartServers, max int, idle time.Duration) *manager {
	m := &manager{start: start, max: max, idle: idle, byID: map[string]*session{}, stopped: make(chan struct{})}
	m.wg.Add(1)
	go m.reap()
	return m
}

// reap closes the sessions idle for longer than m.idle.
func (m *manager) reap() {
	defer m.wg.Done()
	every := min(max(m.idle/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stopped:
			return
		case now := <-t.C:
			m.mu.Lock()
			var old []*session
			for id, s := range m.byID {
				if now.Sub(s.used) > m.idle {
					old = append(old, s)
					delete(m.byID, id)
				}
			}
			m.closing += len(old)
			m.mu.Unlock()
			for _, s := range old {
				m.closeTaken(s)
			}
		}
	}
}

// create makes a session playing l from prefix, or fails with errFull.
func (m *manager) create(ctx context.Context, l Level, prefix string) (*session, harness.InteractiveState, error) {
	var b [12]byte
	rand.Read(b[:])
	s := &session{id: hex.EncodeToString(b[:]), used: time.Now()}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, harness.InteractiveState{}, errors.New("the server is shutting down")
	}
	if len(m.byID)+m.closing >= m.max {
		m.mu.Unlock()
		return nil, harness.InteractiveState{}, errFull
	}
	// Reserve the place before the slow start of the servers.
	m.byID[s.id] = s
	m.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load(ctx, m, l, prefix)
	if err != nil {
		m.mu.Lock()
		delete(m.byID, s.id)
		m.mu.Unlock()
		s.closeLocked()
		return nil, st, err
	}
	return s, st, nil
}

// get returns the session id and marks it used.
func (m *manager) get(id string) (*session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byID[id]
	if ok {
		s.used = time.Now()
	}
	return s, ok
}

// remove ends session id.
func (m *manager) remove(id string) bool {
	m.mu.Lock()
	s, ok := m.byID[id]
	delete(m.byID, id)
	if ok {
		m.closing++
	}
	m.mu.Unlock()
	if ok {
		m.closeTaken(s)
	}
	return ok
}

// closeTaken closes s, which its caller took out of byID and counted in
// closing: it stops counting once its servers are closed.
func (m *manager) closeTaken(s *session) {
	s.close()
	m.mu.Lock()
	m.closing--
	m.mu.Unlock()
}

// forget drops session id, which its caller has closed.
func (m *manager) forget(id string) {
	m.mu.Lock()
	delete(m.byID, id)
	m.mu.Unlock()
}

func (m *manager) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID) + m.closing
}

// close ends every session and the reaper.
func (m *manager) close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	all := make([]*session, 0, len(m.byID))
	for _, s := range m.byID {
		all = append(all, s)
	}
	m.byID = map[string]*session{}
	m.mu.Unlock()
	close(m.stopped)
	m.wg.Wait()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() { defer wg.Done(); s.close() }()
	}
	wg.Wait()
}

// load starts level l from prefix on fresh state, on the session's servers
// when they fit it, else on new ones. s.mu is held.
func (s *session) load(ctx context.Context, m *manager, l Level, prefix string) (harness.InteractiveState, error) {
	if s.closed {
		return harness.InteractiveState{}, errGone
	}
	if s.run != nil {
		s.run.Close()
		s.run = nil
	}
	if s.servers != nil && !s.servers.Fits(l) {
		s.servers.Close()
		s.servers = nil
	}
	if s.servers == nil {
		sv, err := m.start(ctx, l)
		if err != nil {
			return harness.InteractiveState{}, fmt.Errorf("starting %s for level %s: %w", storeTitle(l.Store), l.ID, err)
		}
		s.servers = sv
	}
	run, err := harness.StartInteractive(ctx, harness.InteractiveOptions{
		Case: l.cs, Nodes: s.servers.Nodes(), Prefix: prefix, Seed: m.seed,
	})
	if err != nil {
		return harness.InteractiveState{}, err
	}
	s.level, s.run = l, run
	return run.State(), nil
}

var errGone = errors.New("the session has ended")

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

func (s *session) closeLocked() {
	s.closed = true
	if s.run != nil {
		s.run.Close()
		s.run = nil
	}
	if s.servers != nil {
		s.servers.Close()
		s.servers = nil
	}
}
