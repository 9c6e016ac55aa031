package play

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/backends"
	_ "github.com/locklab/locklab/stores" // registers every store, whose levels the tests play
	"github.com/locklab/locklab/stores/etcd"
	"github.com/locklab/locklab/stores/postgres"
)

// c1c2 is the C1/C2 schedule of the SETNX page.
var c1c2 = strings.Fields("c3 time c1 c2 c1 c2 c1 c1 c2 c2")

// counted starts real redis-server processes per session (an etcd cluster
// or a PostgreSQL server for a level on those) and keeps the addresses of
// every server it started and how many are still open.
type counted struct {
	open  atomic.Int64
	mu    sync.Mutex
	addrs []string
	// procs are the other stores' server processes: an etcd cluster's
	// members, a PostgreSQL server.
	procs []exiter
}

// exiter is a server process: Exited is closed once its current process
// has exited (nil when none was started).
type exiter interface{ Exited() <-chan struct{} }

func (c *counted) start(ctx context.Context, l Level) (Servers, error) {
	sv, err := ClusterServers(backends.Process, "")(ctx, l)
	if err != nil {
		return nil, err
	}
	c.open.Add(1)
	c.mu.Lock()
	for _, n := range sv.Nodes() {
		switch n := n.(type) {
		case *etcd.Node:
			for _, m := range n.Cluster.Members() {
				c.procs = append(c.procs, m)
			}
		case *postgres.Node:
			c.procs = append(c.procs, n.Server)
		default:
			c.addrs = append(c.addrs, n.Addr())
		}
	}
	c.mu.Unlock()
	return &countedServers{Servers: sv, c: c}, nil
}

type countedServers struct {
	Servers
	c    *counted
	once sync.Once
}

func (s *countedServers) Close() error {
	s.once.Do(func() { s.c.open.Add(-1) })
	return s.Servers.Close()
}

// assertGone checks that every server started is closed and no longer
// answers.
func (c *counted) assertGone(t testing.TB) {
	t.Helper()
	assert.Zero(t, c.open.Load(), "servers still open")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.addrs {
		conn, err := redis.Dial("tcp", a, redis.DialConnectTimeout(time.Second), redis.DialReadTimeout(time.Second))
		if err == nil {
			_, err = conn.Do("PING")
			conn.Close()
		}
		assert.Error(t, err, "the server at %s still answers", a)
	}
	// The other stores' servers are known by their processes, not their
	// ports: a port freed early in a test may be another test's server's
	// by its end.
	for _, p := range c.procs {
		if ch := p.Exited(); ch != nil {
			select {
			case <-ch:
			default:
				assert.Fail(t, "a server still runs", "%v", p)
			}
		}
	}
}

type testServer struct {
	t      testing.TB
	srv    *Server
	hs     *httptest.Server
	c      *counted
	client *http.Client
}

func newTestServer(t testing.TB, o Options) *testServer {
	t.Helper()
	c := &counted{}
	o.Start = c.start
	srv, err := New(o)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	// Every participant keeps its connection open, as a browser does.
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	ts := &testServer{t: t, srv: srv, hs: hs, c: c, client: &http.Client{Transport: tr}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		hs.Close()
		srv.Close()
	})
	return ts
}

// post sends body (a value or a raw string) and decodes the answer into out.
func (ts *testServer) post(path string, body any, out any) int {
	ts.t.Helper()
	var b []byte
	if s, ok := body.(string); ok {
		b = []byte(s)
	} else {
		var err error
		b, err = json.Marshal(body)
		require.NoError(ts.t, err)
	}
	resp, err := ts.client.Post(ts.hs.URL+path, "application/json", bytes.NewReader(b))
	require.NoError(ts.t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(ts.t, json.NewDecoder(resp.Body).Decode(out), "answer to %s", path)
	}
	// Read to the end, so that the connection is reused, as a browser's.
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func (ts *testServer) create(level string) response {
	ts.t.Helper()
	var r response
	code := ts.post("/api/sessions", map[string]any{"level": level}, &r)
	require.Equal(ts.t, http.StatusOK, code)
	return r
}

func stepReq(sess string, seq int, step string) map[string]any {
	return map[string]any{"session": sess, "seq": seq, "step": step}
}

// TestAPISolvesC1C2: the C1/C2 level solved through the API alone, on a
// real redis-server: the violation shows at step 10 with its replay
// command, bad requests get a 4xx and change nothing, undo and reset
// replay on fresh state, and ending the session stops its server.
func TestAPISolvesC1C2(t *testing.T) {
	ts := newTestServer(t, Options{})
	r := ts.create("c1c2")
	require.Len(t, r.State.Clients, 3)
	assert.Equal(t, "acquire", r.State.Clients[2].Next[0].Command[0])
	id := r.Session
	for i, st := range c1c2 {
		var a response
		code := ts.post("/api/step", stepReq(id, i, st), &a)
		require.Equal(t, http.StatusOK, code, "step %d (%s)", i+1, st)
		require.Equal(t, i+1, a.Seq)
		if i == 8 {
			// c2's SETNX is next, with the key and c2's token.
			next := a.State.Clients[1].Next
			require.Len(t, next, 1)
			assert.Equal(t, []string{"SETNX", "lock:stale-recovery"}, next[0].Command[:2])
		}
		assert.Equal(t, i == 9, a.Solved, "solved after step %d", i+1)
		assert.Equal(t, i == 9, a.Violation != nil, "violation after step %d", i+1)
		r = a
	}
	require.NotNil(t, r.Violation)
	assert.Equal(t, harness.MutualExclusion, r.Violation.Property)
	assert.Equal(t, 10, r.Violation.Step)
	assert.Equal(t, "locklab demo stale-recovery --strategy setnx-del --schedule 'c3 time c1 c2 c1 c2 c1 c1 c2 c2'", r.Replay)
	assert.Contains(t, r.Timeline, "c1 and c2 hold the lock at once")
	assert.Equal(t, string(harness.MutualExclusion), r.State.History.Events[9].Violation)
	assert.Equal(t, []string{"c2's"}, []string{ownerOf(r.State.History, r.State.History.Events[9].Keys[0])}, "the key holds c2's token")

	// Bad requests: 4xx with a message, nothing run.
	var e apiError
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/step", stepReq(id, 10, "c9"), &e))
	assert.Contains(t, e.Error, "c9: this scenario has 3 clients, c1 to c3")
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/step", stepReq(id, 10, "c3"), &e), "c3 has crashed")
	assert.Contains(t, e.Error, "c3 has crashed: it has nothing to run")
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/step", stepReq(id, 10, "time"), &e), "time is used up")
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/step", stepReq(id, 10, "restart(n1)"), &e), "a fault the scenario does not allow")
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/step", stepReq(id, 10, "c1("), &e))
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/step", `{"session":`, &e))
	assert.Contains(t, e.Error, "malformed")
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/step", `{"session":"x","bogus":1}`, &e))
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/step", map[string]any{"session": id, "step": "c1"}, &e), "no seq")
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/step", stepReq(id, 10, ""), &e))
	assert.Equal(t, http.StatusNotFound, ts.post("/api/step", stepReq("nope", 0, "c1"), &e))
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/sessions", map[string]any{"level": "nope"}, &e))
	assert.Equal(t, http.StatusBadRequest, ts.post("/api/sessions", map[string]any{"level": "c1c2", "prefix": "c1 x("}, &e))
	assert.Equal(t, http.StatusUnprocessableEntity, ts.post("/api/sessions", map[string]any{"level": "c1c2", "prefix": "c9"}, &e))
	resp, err := http.Get(ts.hs.URL + "/api/step")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	// A stale seq (a repeated click) is refused with the current state.
	assert.Equal(t, http.StatusConflict, ts.post("/api/step", stepReq(id, 9, "c1"), &e))
	require.NotNil(t, e.State)
	assert.Equal(t, 10, e.State.Seq)

	// Undo: nine steps replayed on fresh Redis, no violation.
	var u response
	require.Equal(t, http.StatusOK, ts.post("/api/undo", map[string]any{"session": id, "seq": 10}, &u))
	assert.Equal(t, 9, u.Seq)
	assert.Nil(t, u.Violation)
	assert.False(t, u.Solved)
	assert.Equal(t, strings.Join(c1c2[:9], " "), u.State.Schedule)
	// The step undone runs again, to the same end.
	require.Equal(t, http.StatusOK, ts.post("/api/step", stepReq(id, 9, "c2"), &u))
	assert.True(t, u.Solved)

	// Reset to another level, then end the session.
	require.Equal(t, http.StatusOK, ts.post("/api/reset", map[string]any{"session": id, "level": "wrong-release"}, &u))
	assert.Equal(t, 0, u.Seq)
	assert.Equal(t, "set-nx-px-del", u.Level.Strategy)
	assert.Equal(t, []string{"time"}, u.State.Faults)
	require.Equal(t, http.StatusOK, ts.post("/api/end", map[string]any{"session": id}, nil))
	assert.Equal(t, http.StatusNotFound, ts.post("/api/step", stepReq(id, 0, "c1"), &e))
	assert.Zero(t, ts.srv.Sessions())
	ts.c.assertGone(t)
}

func ownerOf(h *harness.History, v string) string {
	for _, a := range h.Acquisitions {
		if a.Token == v {
			return fmt.Sprintf("c%d's", a.Client)
		}
	}
	return v
}

// TestAPIDuplicateClicks: the same click sent eight times at once runs
// once; the others are told the run has moved on.
func TestAPIDuplicateClicks(t *testing.T) {
	ts := newTestServer(t, Options{})
	r := ts.create("c1c2")
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var e apiError
			codes[i] = ts.post("/api/step", stepReq(r.Session, 0, "c3"), &e)
		}()
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == http.StatusOK {
			ok++
		} else {
			assert.Equal(t, http.StatusConflict, c)
		}
	}
	assert.Equal(t, 1, ok, "answers %v", codes)
	resp, err := http.Get(ts.hs.URL + "/api/state?session=" + r.Session)
	require.NoError(t, err)
	defer resp.Body.Close()
	var s response
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	assert.Equal(t, "c3", s.State.Schedule)
}

// TestSessionsCapAndIdle: sessions are separate runs on servers of their
// own; one over the cap is told the room is full; idle sessions are
// closed with their servers; Close removes the rest.
func TestSessionsCapAndIdle(t *testing.T) {
	ts := newTestServer(t, Options{MaxSessions: 3, Idle: time.Hour})
	var rs []response
	for range 3 {
		rs = append(rs, ts.create("c1c2"))
	}
	var e apiError
	assert.Equal(t, http.StatusServiceUnavailable, ts.post("/api/sessions", map[string]any{"level": "c1c2"}, &e))
	assert.Contains(t, e.Error, "the room is full")
	// A step in one session leaves the others where they were.
	var a response
	require.Equal(t, http.StatusOK, ts.post("/api/step", stepReq(rs[0].Session, 0, "c3"), &a))
	require.Equal(t, http.StatusOK, ts.post("/api/step", stepReq(rs[1].Session, 0, "c1"), &a))
	assert.Equal(t, "c1", a.State.Schedule)
	// c3 holds the lock in the first session; c1 gets it in the second:
	// each runs on its own server.
	assert.Contains(t, a.State.History.Events[0].Notes, "c1 acquired")
	ts.srv.Close()
	assert.Zero(t, ts.srv.Sessions())
	ts.c.assertGone(t)

	idle := newTestServer(t, Options{Idle: 100 * time.Millisecond})
	r := idle.create("c1c2")
	require.Eventually(t, func() bool { return idle.srv.Sessions() == 0 }, 10*time.Second, 20*time.Millisecond)
	idle.c.assertGone(t)
	assert.Equal(t, http.StatusNotFound, idle.post("/api/step", stepReq(r.Session, 0, "c3"), &e))
	assert.Contains(t, e.Error, "no such session")
}

// TestHint: the hint is the next step of a counterexample while the run
// follows it, and says where the run left it.
func TestHint(t *testing.T) {
	ts := newTestServer(t, Options{})
	r := ts.create("c1c2")
	var h hintAnswer
	require.Equal(t, http.StatusOK, ts.post("/api/hint", map[string]any{"session": r.Session}, &h))
	require.NotEmpty(t, h.Schedule, h.Message)
	ce := strings.Fields(h.Schedule)
	assert.Equal(t, ce[0], h.Next)
	// Follow the hints to the violation.
	for i := 0; ; i++ {
		require.Less(t, i, 30)
		var a response
		require.Equal(t, http.StatusOK, ts.post("/api/step", stepReq(r.Session, i, h.Next), &a))
		if a.Solved {
			break
		}
		require.Equal(t, http.StatusOK, ts.post("/api/hint", map[string]any{"session": r.Session}, &h))
		require.NotEmpty(t, h.Next, h.Message)
	}
	// Off the path: the hint says where.
	require.Equal(t, http.StatusOK, ts.post("/api/reset", map[string]any{"session": r.Session}, nil))
	other := "c1"
	if ce[0] == "c1" {
		other = "c2"
	}
	require.Equal(t, http.StatusOK, ts.post("/api/step", stepReq(r.Session, 0, other), nil))
	h = hintAnswer{}
	require.Equal(t, http.StatusOK, ts.post("/api/hint", map[string]any{"session": r.Session}, &h))
	assert.Empty(t, h.Next, "%+v (counterexample %v)", h, ce)
	assert.Contains(t, h.Message, "left the counterexample at step 1")
}

// TestLevelsResolve: every level names a scenario and strategy that exist
// and that the scenario applies to.
func TestLevelsResolve(t *testing.T) {
	ls := Levels()
	require.NotEmpty(t, ls)
	seen := map[string]bool{}
	for _, l := range ls {
		assert.False(t, seen[l.ID], "duplicate level %s", l.ID)
		seen[l.ID] = true
		assert.NotEmpty(t, l.Docs)
		assert.Equal(t, l.Safe, l.Why != "", "level %s: a safe level says why", l.ID)
	}
	assert.Equal(t, "c1c2", ls[0].ID)
}

// TestEveryLevelPlays: every level starts on servers of its own and is
// solved by clicks: the unsafe ones by following the hints (a
// counterexample), the safe one by playing it to the end.
func TestEveryLevelPlays(t *testing.T) {
	if testing.Short() {
		t.Skip("explores every level")
	}
	ts := newTestServer(t, Options{})
	for _, l := range Levels() {
		t.Run(l.ID, func(t *testing.T) {
			r := ts.create(l.ID)
			defer ts.post("/api/end", map[string]any{"session": r.Session}, nil)
			require.Len(t, r.State.History.Nodes, l.Nodes)
			for i := 0; !r.Solved; i++ {
				require.Less(t, i, 100, "not solved after 100 steps")
				require.False(t, r.State.Done, "the run ended unsolved: %s\n%s", r.State.Schedule, r.Timeline)
				next := ""
				if !l.Safe {
					var h struct {
						hintAnswer
						apiError
					}
					require.Equal(t, http.StatusOK, ts.post("/api/hint", map[string]any{"session": r.Session}, &h), "hint: %s", h.Error)
					require.NotEmpty(t, h.Next, "%s (after %q)", h.Message, r.State.Schedule)
					if l.answer != "" && l.Property == harness.NoDeadlock {
						// The answer broke the level: the hint is the
						// answer, then the liveness probe's steps.
						require.True(t, strings.HasPrefix(h.Schedule+" ", l.answer+" "), "hint %q, answer %q", h.Schedule, l.answer)
					} else if l.answer != "" {
						// The answer broke the level: the hint is its prefix.
						require.True(t, strings.HasPrefix(l.answer+" ", h.Schedule+" "), "hint %q, answer %q", h.Schedule, l.answer)
					}
					next = h.Next
				} else {
					for _, c := range r.State.Clients {
						if len(c.Next) > 0 {
							next = c.Next[0].Step
							break
						}
					}
				}
				var a response
				code := ts.post("/api/step", stepReq(r.Session, r.Seq, next), &a)
				require.Equal(t, http.StatusOK, code, "step %s after %q", next, r.State.Schedule)
				r = a
			}
			if l.Safe {
				assert.Nil(t, r.Violation)
				assert.Contains(t, r.Message, "Nothing broke")
			} else {
				require.NotNil(t, r.Violation)
				assert.Equal(t, l.Property, r.Violation.Property)
			}
			t.Logf("%s: %s", l.ID, r.State.Schedule)
		})
	}
}

// TestCustomLevel: any scenario on a strategy it applies to is a level,
// listed first and solved like the others.
func TestCustomLevel(t *testing.T) {
	_, err := CustomLevel("redlock-pause", "setnx-del")
	assert.ErrorContains(t, err, "scenario redlock-pause does not apply to setnx-del; it applies to redlock",
		"the strategies it applies to, from the registry")
	_, err = CustomLevel("nope", "setnx-del")
	assert.ErrorContains(t, err, "unknown scenario")
	_, err = CustomLevel("clock-skew", "nope")
	assert.Error(t, err)
	_, err = CustomLevel("member-loses-data", "set-nx-px")
	assert.ErrorContains(t, err, "no quorum", "a scenario of a cluster's members on Redis")
	el, err := CustomLevel("restart-loses-lock", "etcd-lease")
	require.NoError(t, err)
	assert.NotContains(t, el.Goal, "without persistence", "the goal is the restart as etcd runs it")
	assert.Contains(t, el.Goal, "on its data directory")
	l, err := CustomLevel("clock-skew", "setnx-del")
	require.NoError(t, err)
	assert.Equal(t, "clock-skew/setnx-del", l.ID)
	assert.Equal(t, "setnx_getset.md", l.Docs)

	ts := newTestServer(t, Options{Extra: []Level{l}})
	resp, err := ts.client.Get(ts.hs.URL + "/api/levels")
	require.NoError(t, err)
	var ls []Level
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ls))
	resp.Body.Close()
	require.Equal(t, len(Levels())+1, len(ls))
	assert.Equal(t, l.ID, ls[0].ID)
	r := ts.create(l.ID)
	for i, st := range strings.Fields("c1 skew(c2,+32s) c2 c2 c2 c2") {
		require.Equal(t, http.StatusOK, ts.post("/api/step", stepReq(r.Session, i, st), &r), "step %d (%s)", i+1, st)
		if r.Solved {
			break
		}
	}
	assert.True(t, r.Solved, r.Timeline)
}

// TestUndoAfterDeadlock: undo after a run that ended in the liveness probe
// takes back the last step played, not the probe's.
func TestUndoAfterDeadlock(t *testing.T) {
	ts := newTestServer(t, Options{})
	r := ts.create("no-expire")
	for i, st := range strings.Fields("c1 crash(c1) c2 c2") {
		require.Equal(t, http.StatusOK, ts.post("/api/step", stepReq(r.Session, i, st), &r))
	}
	require.True(t, r.Solved)
	require.True(t, r.State.Done)
	assert.Equal(t, 4, r.Seq)
	var u response
	require.Equal(t, http.StatusOK, ts.post("/api/undo", map[string]any{"session": r.Session, "seq": 4}, &u))
	assert.Equal(t, "c1 crash(c1) c2", u.State.Schedule)
	assert.False(t, u.State.Done)
}

// TestCloseStopsHints: Close ends an exploration a hint started, and its
// servers are gone with the sessions'.
func TestCloseStopsHints(t *testing.T) {
	ts := newTestServer(t, Options{})
	r := ts.create("redlock-pause")
	done := make(chan int, 1)
	go func() {
		var e apiError
		done <- ts.post("/api/hint", map[string]any{"session": r.Session}, &e)
	}()
	// The exploration has started its own servers.
	require.Eventually(t, func() bool { return ts.c.open.Load() >= 2 }, 30*time.Second, 10*time.Millisecond)
	ts.srv.Close()
	assert.Equal(t, http.StatusInternalServerError, <-done)
	ts.c.assertGone(t)
}
