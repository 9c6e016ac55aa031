package zkproc_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/serverproc/proctest"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
)

// quiet is a zk.Logger that says nothing.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// logLines are the lines of s's log (all its runs) that hold any of words.
func logLines(t *testing.T, s *zkproc.Server, words ...string) []string {
	return proctest.LogLines(t, s.LogPath, words...)
}

// onServer runs f on a session of s alone; it fails the test where f
// fails or does not return within 30s.
func onServer(t *testing.T, s *zkproc.Server, f func(*zk.Conn) error) {
	t.Helper()
	conn, _, err := zk.Connect([]string{s.Addr()}, 4*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	require.NoError(t, err)
	defer conn.Close()
	done := make(chan error, 1)
	go func() { done <- f(conn) }()
	select {
	case err := <-done:
		require.NoError(t, err, "on %s", s.Name())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer in 30s", s.Name())
	}
}

// create creates the persistent node path through s.
func create(t *testing.T, s *zkproc.Server, path string) {
	t.Helper()
	onServer(t, s, func(c *zk.Conn) error {
		_, err := c.Create(path, []byte("held"), 0, zk.WorldACL(zk.PermAll))
		return err
	})
}

// exists syncs s with its leader and says whether path exists there.
func exists(t *testing.T, s *zkproc.Server, path string) bool {
	t.Helper()
	var found bool
	onServer(t, s, func(c *zk.Conn) error {
		if _, err := c.Sync(path); err != nil {
			return err
		}
		ok, _, err := c.Exists(path)
		found = ok
		return err
	})
	return found
}

// lagged creates /before on an ensemble of three, picks A (a follower),
// B and C, C the leader when cLeads, B otherwise; then kills A, which
// lags, and creates /lock through B, which B and C acknowledge.
func lagged(t *testing.T, cLeads bool) (a, b, c *zkproc.Server) {
	e := zktest.Start(t, zkproc.Options{})
	leader, err := e.Leader(ctxFor(t))
	require.NoError(t, err)
	create(t, leader, "/before")
	var fol []*zkproc.Server
	for _, s := range e.Servers() {
		if s != leader {
			fol = append(fol, s)
		}
	}
	a, b, c = fol[0], leader, fol[1]
	if cLeads {
		b, c = fol[1], leader
	}
	t.Logf("A=%s B=%s C=%s, %s leads", a.Name(), b.Name(), c.Name(), leader.Name())
	a.Kill()
	create(t, b, "/lock")
	return a, b, c
}

// electionWords pick the lines of a server's log that show its epochs,
// votes, roles and syncs.
var electionWords = []string{"New election", "LEADING -", "FOLLOWING -", "Sending ", "runcat", "Epoch not found"}

// elections logs the lines of s's log past the first n that show its
// epochs, votes, roles and syncs.
func elections(t *testing.T, s *zkproc.Server, n int) {
	for _, l := range logLines(t, s, electionWords...)[n:] {
		t.Logf("%s: %.220s", s.Name(), l)
	}
}

// TestServerRestartsEmpty: a server restarted with an emptied version-2
// (RestartEmpty: no snapshot, log or epochs; its myid kept) while a
// lagging server is down. A (killed) misses the creation of /lock that B
// and C acknowledged; C loses its data.
//
// ZooKeeper starts the emptied server with a zxid of 0 and epochs of 0
// and lets it vote. Restarted while B runs, C follows B (its zxid is the
// highest), which syncs it, and nothing is lost: A catches up whether B
// stays (B leads) or dies once C synced (C leads). Restarted while B is
// down, C votes for A (A's epoch and zxid beat C's zeros): A leads, /lock
// is gone, and B, back, follows A and drops the node too.
func TestServerRestartsEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts ensembles")
	}
	for _, cLeads := range []bool{false, true} {
		who := map[bool]string{false: "C-follows", true: "C-leads"}[cLeads]
		for _, killB := range []bool{false, true} {
			t.Run(who+"/B-up"+map[bool]string{false: "", true: "-then-killed"}[killB], func(t *testing.T) {
				ctx := ctxFor(t)
				a, b, c := lagged(t, cLeads)
				n := len(logLines(t, c, electionWords...))
				require.NoError(t, c.RestartEmpty(ctx), "C rejoins empty")
				elections(t, c, n)
				assert.True(t, exists(t, c, "/lock"), "C synced from B")
				if killB {
					b.Kill()
				}
				require.NoError(t, a.Restart(ctx))
				mode, err := a.Mode(ctx)
				require.NoError(t, err)
				assert.Equal(t, "follower", mode, "A's zxid is the lowest")
				for _, s := range []*zkproc.Server{a, b, c} {
					if s.Running() {
						assert.True(t, exists(t, s, "/lock"), "through %s", s.Name())
					}
				}
			})
		}
		t.Run(who+"/B-down", func(t *testing.T) {
			ctx := ctxFor(t)
			a, b, c := lagged(t, cLeads)
			c.Kill()
			b.Kill()
			nc, na := len(logLines(t, c, electionWords...)), len(logLines(t, a, electionWords...))
			done := make(chan error, 1)
			go func() { done <- c.RestartEmpty(ctx) }()
			require.NoError(t, a.Restart(ctx), "A and C")
			require.NoError(t, <-done)
			elections(t, c, nc)
			elections(t, a, na)
			mode, err := a.Mode(ctx)
			require.NoError(t, err)
			assert.Equal(t, "leader", mode, "C voted for A")
			assert.True(t, exists(t, a, "/before"))
			assert.False(t, exists(t, a, "/lock"), "the acknowledged node is lost")
			assert.False(t, exists(t, c, "/lock"))
			nb, na := len(logLines(t, b, electionWords...)), len(logLines(t, a, "Sending "))
			require.NoError(t, b.Restart(ctx), "B follows A")
			elections(t, b, nb)
			for _, l := range logLines(t, a, "Sending ")[na:] {
				t.Logf("%s: %.220s", a.Name(), l)
			}
			assert.False(t, exists(t, b, "/lock"), "B dropped the node")
		})
	}
}
