package etcdproc_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/internal/tooling/serverproc/proctest"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
)

// logLines are the lines of m's log (all its runs) that hold any of words.
func logLines(t *testing.T, m *etcdproc.Member, words ...string) []string {
	return proctest.LogLines(t, m.LogPath, words...)
}

// restartUntil runs restart (m's) in the background until m's log holds
// one more line with word than it did, or fails the test when the restart
// ends first. It returns how many such lines the log held before, and the
// restart's end.
func restartUntil(t *testing.T, m *etcdproc.Member, word string, restart func(context.Context) error) (int, <-chan error) {
	t.Helper()
	n := len(logLines(t, m, word))
	done := make(chan error, 1)
	go func() { done <- restart(ctxFor(t)) }()
	for len(logLines(t, m, word)) <= n {
		select {
		case err := <-done:
			t.Fatalf("%s's restart ended before its log said %q: %v", m.Name, word, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return n, done
}

// has reads key with a linearizable read through m alone.
func has(t *testing.T, m *etcdproc.Member, key string) bool {
	t.Helper()
	return get(t, m, key, false) != ""
}

// lagged writes "before" on a cluster of three, picks A (a follower),
// B and C, C the leader when cLeads, B otherwise; then kills A, which
// lags, and writes "lock" through B, which B and C acknowledge.
func lagged(t *testing.T, cLeads bool) (a, b, c *etcdproc.Member) {
	ctx := ctxFor(t)
	cl := etcdtest.Start(t, etcdproc.Options{})
	_, err := etcdtest.Client(t, cl).Put(ctx, "before", "x")
	require.NoError(t, err)
	leader, err := cl.Leader(ctx)
	require.NoError(t, err)
	var fol []*etcdproc.Member
	for _, m := range cl.Members() {
		if m != leader {
			fol = append(fol, m)
		}
	}
	a, b, c = fol[0], leader, fol[1]
	if cLeads {
		b, c = fol[1], leader
	}
	t.Logf("A=%s B=%s C=%s, %s leads", a.Name, b.Name, c.Name, leader.Name)
	a.Kill()
	_, err = b.Client().Put(ctx, "lock", "held")
	require.NoError(t, err)
	return a, b, c
}

// bootstrapTimeout is how long a member that starts on an emptied data
// directory waits for a peer's member list (etcd 3.4's
// ServerConfig.BootstrapTimeout, which no flag sets): a peer that has
// not answered by then counts as down, and the member bootstraps afresh.
const bootstrapTimeout = time.Second

// refused restarts c on an emptied data directory while peer answers its
// peers, and checks that etcd refuses to start it. Whether peer answers
// c's question within bootstrapTimeout is up to the machine's load, so a
// watcher asks peer the same question (its member list) every 20 ms while
// c starts: where c starts and one of those answers took half of
// bootstrapTimeout or more, the case did not arise (c bootstrapped
// afresh, as in no-peer-answers) and the test is skipped, saying so;
// where every answer came sooner, c must refuse.
func refused(t *testing.T, c, peer *etcdproc.Member) {
	t.Helper()
	ask := &http.Client{Timeout: 2 * bootstrapTimeout}
	membersOf := func() time.Duration {
		began := time.Now()
		resp, err := ask.Get(peer.PeerURL + "/members")
		if err != nil {
			return ask.Timeout
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return ask.Timeout
		}
		return time.Since(began)
	}
	// First until peer answers at all: c asks it as soon as it starts.
	ctx := ctxFor(t)
	for membersOf() >= ask.Timeout {
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered a peer's ask for its member list", peer.Name)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop, slowest := make(chan struct{}), make(chan time.Duration, 1)
	go func() {
		var most time.Duration
		for {
			most = max(most, membersOf())
			select {
			case <-stop:
				slowest <- most
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	err := c.RestartEmpty(ctx)
	close(stop)
	most := <-slowest
	if err == nil && most >= bootstrapTimeout/2 {
		t.Skipf("%s started: %s took %v to answer a peer while it did (etcd waits %v for an answer), "+
			"so the machine was too loaded for the case of a peer that answers", c.Name, peer.Name, most, bootstrapTimeout)
	}
	require.Error(t, err, "C refuses to start: %s answered a peer within %v throughout", peer.Name, most)
	assert.Contains(t, err.Error(), "has already been bootstrapped")
}

// TestMemberRestartsEmpty: a member restarted on an emptied data directory
// (RestartEmpty, the flags of every start: --initial-cluster-state new)
// while a lagging member is down. A (killed) misses the write of "lock"
// that B and C acknowledged; C loses its data directory.
//
// Where a peer answers it, etcd asks the peers for the member list before
// it bootstraps, finds itself already published there and refuses to
// start ("member ... has already been bootstrapped"): nothing is lost.
// With B up, A catches up from B; with B down too, A alone is no quorum
// until B comes back with the write. C cannot rejoin while a peer answers
// it: it would have to be removed from the cluster and added again.
//
// Where no peer answers (B and A down as C starts), C bootstraps a fresh
// raft log as the same member of the same cluster, votes for A, whose log
// is longer, and the acknowledged write is gone: from A and C, and from B
// once it rejoins. B's log on disk holds the write past its commit index
// (etcd does not sync a state that only moves the commit index, and B was
// killed right after the write), so B drops it for the new leader's entry
// ("found conflict at index ...") without a complaint.
func TestMemberRestartsEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts clusters")
	}
	for _, cLeads := range []bool{false, true} {
		who := map[bool]string{false: "C-follows", true: "C-leads"}[cLeads]
		t.Run(who+"/B-up", func(t *testing.T) {
			ctx := ctxFor(t)
			a, b, c := lagged(t, cLeads)
			refused(t, c, b)
			assert.False(t, c.Running())
			require.NoError(t, a.Restart(ctx), "A and B")
			assert.True(t, has(t, a, "lock"), "A caught up from B")
			assert.True(t, has(t, b, "lock"))
		})
		t.Run(who+"/B-down", func(t *testing.T) {
			ctx := ctxFor(t)
			a, b, c := lagged(t, cLeads)
			c.Kill()
			b.Kill()
			// A first, until it serves its peers: C asks it.
			_, done := restartUntil(t, a, "now serving peer/client/metrics", a.Restart)
			refused(t, c, a)
			require.NoError(t, b.Restart(ctx), "B back: A and B")
			require.NoError(t, <-done)
			assert.True(t, has(t, a, "lock"))
			assert.True(t, has(t, b, "lock"))
		})
		t.Run(who+"/no-peer-answers", func(t *testing.T) {
			ctx := ctxFor(t)
			a, b, c := lagged(t, cLeads)
			c.Kill()
			b.Kill()
			// C first, until its raft starts: it asked no one.
			started, done := restartUntil(t, c, "starting local member", c.RestartEmpty)
			require.NoError(t, a.Restart(ctx), "A and C")
			require.NoError(t, <-done, "C bootstrapped again")
			for _, l := range logLines(t, c, "newRaft")[started:] {
				t.Logf("C: %.200s", l)
			}
			for _, l := range logLines(t, a, "newRaft", "became leader") {
				t.Logf("A: %.200s", l)
			}
			assert.True(t, has(t, a, "before"))
			assert.False(t, has(t, a, "lock"), "the acknowledged write is lost")
			assert.False(t, has(t, c, "lock"))
			newRafts := len(logLines(t, b, "newRaft"))
			err := b.Restart(ctx)
			for _, l := range logLines(t, b, "newRaft", "panic", "conflict")[newRafts:] {
				t.Logf("B: %.300s", l)
			}
			// What B does depends on whether its commit index reached its
			// disk before it was killed: if not (as seen), it drops the
			// entry for the new leader's; if so, it cannot rejoin.
			if err != nil {
				t.Logf("B does not rejoin: %v", err)
				return
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			resp, err := b.Client().Get(rctx, "lock", clientv3.WithSerializable())
			if err != nil {
				t.Logf("B rejoined, and does not answer: %v", err)
				return
			}
			t.Logf("B rejoined; the lock is in B's copy: %v", resp.Count > 0)
		})
	}
}
