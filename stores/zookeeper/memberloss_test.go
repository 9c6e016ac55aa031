package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
)

// lossNode is a node on an ensemble of its own, configured as the
// driver's: a member's loss kills and empties its servers.
func lossNode(t *testing.T) *Node {
	return NewNode("n1", zktest.Start(t, zkproc.Options{Config: serverConfig}))
}

// TestZKMemberLosesData: member-loses-data's cells, as the matrix explores
// them, on a real ensemble: a follower lags (killed) while c1 takes the
// lock, and another server comes back emptied while the leader is down;
// it votes with a zxid of 0, the lagging server leads, and c2 acquires
// beside c1 on each of the three locks.
func TestZKMemberLosesData(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts servers of an ensemble")
	}
	n := lossNode(t)
	strats := []string{"zk-recipe", "zk-ephemeral", "zk-golib"}
	began := time.Now()
	m, err := harness.Matrix(context.Background(), harness.MatrixOptions{
		Strategies:       strats,
		Scenarios:        []string{"member-loses-data"},
		Stores:           map[string][]harness.Node{Name: {n}},
		StorePreemptions: harness.StorePreemptions, StoreSchedules: harness.StoreSchedules,
	})
	require.NoError(t, err)
	for _, st := range strats {
		c, ok := m.Cell(st, "member-loses-data")
		require.True(t, ok, st)
		t.Logf("%s: %s %q after %d schedules, %v (%s)", st, c.Outcome, c.Message, c.Schedules, c.Elapsed.Round(time.Millisecond), c.Schedule)
		if c.Counterexample != nil {
			for _, e := range c.Counterexample.Events {
				if len(e.Notes) > 0 {
					t.Logf("  %d %s %v", e.Step, e.Label, e.Notes)
				}
			}
		}
		assert.Equal(t, harness.Violated, c.Outcome, "%s: %s", st, c.Message)
	}
	t.Logf("the cells in %v", time.Since(began).Round(time.Millisecond))
	whole(t, n)
}

// TestZKMemberLossRecovers: after a run whose server lost its data, the
// next run starts on a whole ensemble of one history: every server runs
// and serves, they agree on the zxid, the lock's paths are as a first run
// finds them, and the same schedule plays out as it did.
func TestZKMemberLossRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts servers of an ensemble")
	}
	n := lossNode(t)
	cs := harnesstest.Case(t, "member-loses-data", "zk-recipe")
	var verdicts []harness.Outcome
	for range 2 {
		began := time.Now()
		h, err := harness.Run(context.Background(), harness.RunOptions{Case: cs, Nodes: []harness.Node{n}})
		require.NoError(t, err)
		t.Logf("%s in %v: %s", h.Verdict.Outcome, time.Since(began).Round(time.Millisecond), h.Schedule)
		for _, e := range h.Events {
			if len(e.Notes) > 0 {
				t.Logf("  %d %s %v", e.Step, e.Label, e.Notes)
			}
		}
		verdicts = append(verdicts, h.Verdict.Outcome)
		whole(t, n)
	}
	assert.Equal(t, verdicts[0], verdicts[1], "the second run plays as the first")
	assert.True(t, fault.Supports(n, fault.MemberLoss))
}

// whole checks that n's ensemble is whole and of one history: every
// server runs and serves, a node created through one is seen through
// every other at the same zxid, and no lock's path holds a child.
func whole(t *testing.T, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := n.Ensemble
	for _, s := range e.Servers() {
		require.True(t, s.Running(), "%s runs", s.Name())
	}
	require.NoError(t, e.WaitHealthy(ctx))
	conn, _, err := zk.Connect(e.Addrs()[:1], 4*time.Second, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Create("/member-loss-probe", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, probe, err := conn.Exists("/member-loss-probe")
	require.NoError(t, err)
	for _, s := range e.Servers() {
		c, _, err := zk.Connect([]string{s.Addr()}, 4*time.Second, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
		require.NoError(t, err)
		_, err = c.Sync("/member-loss-probe")
		require.NoError(t, err, "through %s", s.Name())
		ok, st, err := c.Exists("/member-loss-probe")
		c.Close()
		require.NoError(t, err, "through %s", s.Name())
		require.True(t, ok, "through %s", s.Name())
		assert.Equal(t, probe.Czxid, st.Czxid, "the probe's zxid through %s", s.Name())
	}
	require.NoError(t, conn.Delete("/member-loss-probe", -1))
	var walk func(p string) []string
	walk = func(p string) []string {
		kids, _, err := conn.Children(p)
		require.NoError(t, err, p)
		var out []string
		for _, k := range kids {
			child := p + "/" + k
			if p == "/" {
				child = "/" + k
			}
			if k == "zookeeper" && p == "/" {
				continue
			}
			sub := walk(child)
			if len(sub) == 0 {
				out = append(out, child)
			}
			out = append(out, sub...)
		}
		return out
	}
	for _, leaf := range walk("/") {
		_, st, err := conn.Exists(leaf)
		require.NoError(t, err)
		assert.Zero(t, st.EphemeralOwner, "an ephemeral node is left: %s", leaf)
	}
}
