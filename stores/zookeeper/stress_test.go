package zookeeper

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/harness/stress/stresstest"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
	"github.com/locklab/locklab/strategies/zklock"
)

// The stress tests of the process mode run this test binary as their
// workers.
// TestMain: the tests that fault no server share one ensemble
// (zktest.Shared), closed after them.
func TestMain(m *testing.M) {
	code := stresstest.Run(m)
	zktest.CloseShared()
	os.Exit(code)
}

// A zk-recipe run is refused without an ensemble, with a TTL that is no
// whole multiple of the shortest session timeout, and with a Redis node
// fault; a Redis strategy is refused on ZooKeeper.
func TestZooKeeperStressOptions(t *testing.T) {
	t.Parallel()
	n := NewNode("n1", &zkproc.Ensemble{}) // never started: every case is refused first
	for name, o := range map[string]stress.Options{
		"no ensemble": {Strategy: "zk-recipe"},
		"ttl 100ms":   {Strategy: "zk-recipe", Store: n, TTL: 100 * time.Millisecond},
		"ttl 1s":      {Strategy: "zk-recipe", Store: n, TTL: time.Second},
		"restart":     {Strategy: "zk-ephemeral", Store: n, Faults: []fault.Fault{fault.Restart}},
		"redis on zk": {Strategy: "set-nx-px", Store: n},
	} {
		_, err := stress.Run(context.Background(), o)
		assert.True(t, errors.Is(err, locklab.ErrInvalid), "%s: %v, want ErrInvalid", name, err)
	}
	_, err := stress.Run(context.Background(), stress.Options{Strategy: "zk-golib", Store: n, TTL: time.Second})
	assert.ErrorContains(t, err, "stress: TTL 1s: ZooKeeper's leases are whole multiples of 400ms, at least 400ms")
}

// startStressEnsemble starts an ensemble as the driver does, for a stress
// run of its own.
func startStressEnsemble(t *testing.T) *Node {
	t.Helper()
	return NewNode("n1", zktest.Start(t, zkproc.Options{Config: serverConfig}))
}

// lockNodes are the ephemeral nodes under the locks' root: the locks
// still held, or queued for.
func lockNodes(t *testing.T, e *zkproc.Ensemble) []string {
	t.Helper()
	conn, _, err := zk.Connect(e.Addrs(), 10*time.Second, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	require.NoError(t, err)
	defer conn.Close()
	var out []string
	var walk func(p string)
	walk = func(p string) {
		ok, st, err := conn.Exists(p)
		require.NoError(t, err)
		if !ok {
			return
		}
		if st.EphemeralOwner != 0 {
			out = append(out, p)
		}
		children, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		require.NoError(t, err)
		for _, c := range children {
			walk(p + "/" + c)
		}
	}
	walk(zklock.DefaultRoot)
	return out
}

// nothingLeft checks that no lock node outlives the run by more than a
// session timeout: the clients that ended closed their sessions, and the
// crashed ones' sessions expired.
func nothingLeft(t *testing.T, e *zkproc.Ensemble, ttl time.Duration) {
	t.Helper()
	var left []string
	for end := time.Now().Add(ttl + 5*time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if left = lockNodes(t, e); len(left) == 0 {
			return
		}
	}
	assert.Empty(t, left, "lock nodes left behind under %s", zklock.DefaultRoot)
}

// zk-recipe with its fence checked, clients crashing (their sessions
// expire a TTL later) and the leader killed, paused and cut off from the
// clients: every node fault heals, the history is linearizable, no update
// is lost, and no lock node outlives the run. The run goes on until three
// faults are over and the clients have taken the lock after them; the
// Duration is a deadline, and the check has a minute, for a loaded
// machine.
func TestRecipeStress(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a ZooKeeper ensemble for several seconds")
	}
	n := startStressEnsemble(t)
	ttl := 800 * time.Millisecond
	rep := stresstest.Until(t, stress.Options{
		Strategy: zklock.RecipeName, Store: n, Clients: 4, Duration: 3 * time.Minute, TTL: ttl,
		PauseProb: -1, CrashProb: 0.02, Seed: 4, CheckTimeout: time.Minute,
		Faults: StressFaults, FaultEvery: 1500 * time.Millisecond, FaultFor: time.Second,
	}, stresstest.AfterFaults(3, 10))
	t.Logf("%d cycles, %d crashes, %d overlaps, %d fence refusals, %d errors (%s), node faults %+v",
		rep.Cycles, rep.Crashes, rep.Overlaps, rep.FenceRefusals, rep.Errors, rep.FirstError, rep.NodeFaults)
	assert.Positive(t, rep.Cycles)
	assert.NotEmpty(t, rep.NodeFaults)
	for _, f := range rep.NodeFaults {
		assert.Empty(t, f.Err, "%v on %s", f.Kind, f.Node)
	}
	assert.Zero(t, rep.LostUpdates, "the fence keeps every update")
	assert.Empty(t, rep.Liveness)
	require.NotNil(t, rep.Linearizability)
	assert.Equal(t, stress.Linearizable, rep.Linearizability.Result)
	nothingLeft(t, n.Ensemble, ttl)
}

// zk-recipe with each client a process of its own, with a session of its
// own: a pause is SIGSTOP, heartbeats included, past the session timeout,
// so the paused holder's node goes with its session and the next client
// takes the lock while it works on; the fence refuses it. A crash is
// SIGKILL, whose session expires. The run goes on for 50 cycles, and
// until the fence has refused a stopped holder once it woke; the Duration
// is a deadline, and the check has a minute, for a loaded machine.
func TestRecipeStressProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes on a ZooKeeper ensemble for several seconds")
	}
	n := startStressEnsemble(t)
	ttl := 800 * time.Millisecond
	rep := stresstest.Until(t, stress.Options{
		Strategy: zklock.RecipeName, Store: n, Clients: 3, Duration: 3 * time.Minute, TTL: ttl,
		PauseProb: 0.2, CrashProb: 0.01, Seed: 5, Processes: true, WorkerCommand: stresstest.WorkerCommand(t),
		CheckTimeout: time.Minute,
	}, func(p stress.Progress) bool { return p.Cycles >= 50 && p.FenceRefusals > 0 })
	t.Logf("%d cycles, %d pauses, %d crashes, %d overlaps, %d fence refusals, %d errors (%s)",
		rep.Cycles, rep.Pauses, rep.Crashes, rep.Overlaps, rep.FenceRefusals, rep.Errors, rep.FirstError)
	assert.Positive(t, rep.Pauses)
	assert.Positive(t, rep.Overlaps, "a holder stopped past its session timeout overlaps the next holder")
	assert.Positive(t, rep.FenceRefusals, "the fence refuses the stopped holder")
	assert.Zero(t, rep.LostUpdates, "the fence keeps every update")
	assert.Empty(t, rep.Liveness)
	require.NotNil(t, rep.Linearizability)
	assert.Equal(t, stress.Linearizable, rep.Linearizability.Result)
	stresstest.NoWorkersLeft(t)
	nothingLeft(t, n.Ensemble, ttl)
}
