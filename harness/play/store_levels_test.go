package play

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores/etcd"
)

// play plays schedule on the session from a reset to level, and returns
// the state after its last step.
func (ts *testServer) play(sess, level, schedule string) response {
	ts.t.Helper()
	var r response
	require.Equal(ts.t, http.StatusOK, ts.post("/api/reset", map[string]any{"session": sess, "level": level}, &r), "reset to %s", level)
	require.Equal(ts.t, 0, r.Seq)
	for i, st := range strings.Fields(schedule) {
		var a response
		require.Equal(ts.t, http.StatusOK, ts.post("/api/step", stepReq(sess, i, st), &a), "%s: step %d (%s) of %q", level, i+1, st, schedule)
		r = a
	}
	return r
}

// storeLevelRuns are the schedules TestStoreLevels plays, a winning one
// and a losing one of each store level; TestWorkshopSolutions holds the
// answer key's store levels to the winning ones.
var storeLevelRuns = []storeLevelRun{
	// c1 leases and acquires, sleeps past its TTL (its lease is
	// revoked); c2 leases, acquires and writes; c1 wakes and writes.
	{"etcd-pause", "c1 c1 c1 c2 c2 c2 c1", true, "resource accepted c1's fence", 0, ""},
	// c1 is done, released or not, before c2 starts: one writer at a
	// time.
	{"etcd-pause", "c1 c1 c1 c1 c1 c1 c2 c2 c2 c2 c2", false, "verdict: SAFE", 0, ""},
	// The same pause against the fenced resource, played to the end:
	// c1's write carries the older revision and is refused.
	{"etcd-fenced", "c1 c1 c1 c2 c2 c2 c1 c1 c1 c2 c2", true, "write refused", 0, ""},
	// The stale write is refused, but the run is not over yet.
	{"etcd-fenced", "c1 c1 c1 c2 c2 c2 c1", false, "write refused", 0, ""},
	// c1 holds etcd-mutex's key and is cut off; its session's lease
	// runs out, c2 acquires and writes; c1 comes back, writes with
	// the older revision, is refused, and releases.
	{"etcd-session-replaced", "c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1 c1 c2", true, "write refused", 0, ""},
	// The stale write is refused, but the run is not over yet.
	{"etcd-session-replaced", "c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1", false, "write refused", 0, ""},
	// The reply to c1's ls after its create is lost: zk.Lock returns
	// an error with its node left in line, c1's retry waits behind
	// it, and the probes after the run wait behind both.
	{"zk-lost-reply", "c2 c1 lose(c1) c1 c1 c1 c1 c2 c2 c2", true, "verdict: DEADLOCK", 18, ""},
	// A lost create is found again by its GUID: c1 acquires.
	{"zk-lost-reply", "lose(c1) c1 c1 c1 c1 c1 c2 c2 c2 c2", false, "verdict: SAFE", 0, ""},
	// c1 takes zk.Lock's node and sleeps past its session timeout:
	// the session expires, c2 takes the lock and writes, and c1's
	// write carries no fence for the resource to refuse.
	{"zk-golib", "c1 c1 c1 c2 c2 c2 c1", true, "stale write from c1", 0, ""},
	// c1 wakes and writes before c2 has written: nothing stale yet.
	{"zk-golib", "c1 c1 c1 c1 c1 c2 c2 c2 c2", false, "verdict: SAFE", 0, ""},
	// c1 is cut off while it holds zk.Lock's node, its session
	// expires and c2 takes the lock and writes; go-zookeeper opens a
	// new session for c1, whose write carries no fence.
	{"zk-session-replaced", "c1 c1 isolate(c1) time c2 c2 c2 rejoin(c1) c1", true, "stale write from c1", 0, ""},
	// Cut off only once it has released: c2 takes a free lock.
	{"zk-session-replaced", "c1 c1 c1 c1 isolate(c1) time c2 c2 c2 c2", false, "verdict: SAFE", 0, ""},
	// c1 takes the lock table's row on the primary, whose
	// asynchronous standby never sees it; the standby is promoted and
	// c2 takes the row there.
	{"pg-failover", "c1 failover(n1) c2", true, "c1 and c2 hold the lock at once", 0, ""},
	// A failover after c1 released: c2 takes a free lock.
	{"pg-failover", "c1 c1 c1 failover(n1) c2 c2 c2", false, "verdict: SAFE", 0, ""},
	// c1 holds the advisory lock and pauses; the server ends its
	// session; c2 acquires and writes; c1 wakes and writes.
	// c2's acquire already makes two holders (c1 was told nothing);
	// c1's write after c2's solves the level, and is what it shows.
	{"pg-session-killed", "c1 c1 terminate(c1) c2 c2 c1", true, "c1 and c2 hold the lock at once", 0, ""},
	// Ended before c1 acquires, the session takes nothing with it.
	{"pg-session-killed", "terminate(c1) c1 c1 c2 c1 c1", false, "verdict: SAFE", 0, ""},
	// c1 holds the advisory lock in its session; the restart ends it,
	// and c2 acquires while c1 works on.
	{"pg-restart", "c1 restart(n1) c2", true, "c1 and c2 hold the lock at once", 0, ""},
	// A restart after c1 released: c2 takes a free lock.
	{"pg-restart", "c1 c1 c1 restart(n1) c2 c2 c2", false, "verdict: SAFE", 0, ""},
}

// storeLevelRun is a schedule played on a store level.
type storeLevelRun struct {
	level, schedule string
	won             bool
	// sees is in the timeline after the schedule.
	sees string
	// at, when set, is the step of the run's first violation (else
	// the schedule's last), of property first (else the level's).
	at    int
	first harness.Property
}

// TestStoreLevels plays the etcd and PostgreSQL levels through the API on
// real servers (a three-member etcd cluster, a throwaway PostgreSQL), in
// one session that moves from one level to the next: a winning schedule
// solves each, a losing one leaves it unsolved, and ending the session
// stops every server it started.
func TestStoreLevels(t *testing.T) {
	ts := newTestServer(t, Options{})
	r := ts.create("etcd-pause")
	id := r.Session
	assert.Equal(t, etcd.Name, r.Level.Store)
	assert.Empty(t, r.Level.Unavailable)
	require.Len(t, r.State.History.Nodes, 1)
	require.Len(t, r.State.Clients, 2)
	assert.NotEmpty(t, r.State.Clients[0].Next[0].Command, "c1's next step has a label")

	for _, tc := range storeLevelRuns {
		r := ts.play(id, tc.level, tc.schedule)
		l, _ := level(tc.level)
		if tc.level == "pg-restart" {
			assert.NotContains(t, r.Level.Story, "without persistence", "PostgreSQL's restart keeps its data: the level tells its own story")
		}
		assert.Equal(t, tc.won, r.Solved, "%s after %q:\n%s", tc.level, tc.schedule, r.Timeline)
		assert.Contains(t, r.Timeline, tc.sees, "%s after %q", tc.level, tc.schedule)
		switch {
		case tc.won && l.Safe:
			assert.True(t, r.State.Done)
			assert.Nil(t, r.Violation)
			assert.Contains(t, r.Message, "Nothing broke")
		case tc.won:
			at, first := cmp.Or(tc.at, len(strings.Fields(tc.schedule))), cmp.Or(tc.first, l.Property)
			require.NotNil(t, r.Violation)
			assert.Equal(t, first, r.Violation.Property)
			assert.Equal(t, at, r.Violation.Step)
		default:
			assert.Nil(t, r.Violation, "%s after %q:\n%s", tc.level, tc.schedule, r.Timeline)
		}
		if !tc.won && !l.Safe {
			assert.True(t, r.State.Done, "the losing run of %s is over: it cannot be won by playing on", tc.level)
		}
	}
	// Undo on PostgreSQL replays on the same server.
	var u response
	require.Equal(t, http.StatusOK, ts.post("/api/undo", map[string]any{"session": id, "seq": 7}, &u))
	assert.Equal(t, "c1 c1 c1 restart(n1) c2 c2", u.State.Schedule)
	require.Equal(t, http.StatusOK, ts.post("/api/end", map[string]any{"session": id}, nil))
	assert.Zero(t, ts.srv.Sessions())
	ts.c.assertGone(t)
}

// TestStoreLevelUnavailable: where a store's servers are not installed,
// its levels are listed as unavailable with the reason, and starting one
// is refused with it, without starting anything.
func TestStoreLevelUnavailable(t *testing.T) {
	ts := newTestServer(t, Options{Installed: func(store string) error {
		if store == etcd.Name {
			return errors.New("etcd not found on PATH")
		}
		return nil
	}})
	resp, err := ts.client.Get(ts.hs.URL + "/api/levels")
	require.NoError(t, err)
	var ls []Level
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ls))
	resp.Body.Close()
	seen := 0
	for _, l := range ls {
		switch l.Store {
		case etcd.Name:
			seen++
			assert.Equal(t, "this level plays on etcd: etcd not found on PATH", l.Unavailable, l.ID)
		default:
			assert.Empty(t, l.Unavailable, l.ID)
		}
	}
	assert.Equal(t, 3, seen, "etcd levels")
	var e apiError
	assert.Equal(t, http.StatusUnprocessableEntity, ts.post("/api/sessions", map[string]any{"level": "etcd-pause"}, &e))
	assert.Equal(t, "level etcd-pause is unavailable: this level plays on etcd: etcd not found on PATH", e.Error)
	r := ts.create("c1c2")
	assert.Equal(t, http.StatusUnprocessableEntity, ts.post("/api/reset", map[string]any{"session": r.Session, "level": "etcd-fenced"}, &e))
	assert.Contains(t, e.Error, "etcd not found")
	// The session is still on its level.
	var s response
	require.Equal(t, http.StatusOK, ts.post("/api/step", stepReq(r.Session, 0, "c3"), &s))
	assert.Equal(t, "c1c2", s.Level.ID)
	assert.EqualValues(t, 1, ts.c.open.Load(), "only the Redis level's servers started")
}

// TestLevelsSayTheirServers: every level says what it plays on in its
// store's words (Driver.PlayServers), which the page shows as they come.
func TestLevelsSayTheirServers(t *testing.T) {
	want := map[string]string{
		"c1c2":        "1 Redis node",
		"etcd-pause":  "a three-member etcd cluster",
		"pg-failover": "a PostgreSQL server and its asynchronous standby",
		"pg-restart":  "a PostgreSQL server",
		"zk-golib":    "a three-server ZooKeeper ensemble",
	}
	for _, l := range Levels() {
		assert.NotEmpty(t, l.Servers, "level %s", l.ID)
		if w, ok := want[l.ID]; ok {
			assert.Equal(t, w, l.Servers, "level %s", l.ID)
		}
	}
}
