package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/harness/stress/stresstest"
	"github.com/locklab/locklab/stores/postgres"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	"github.com/locklab/locklab/stores/redis"
	_ "github.com/locklab/locklab/strategies/pglock" // pg-lock-table, pg-for-update, pg-advisory
)

// The stress tests of the process mode run this test binary as their
// workers.
func TestMain(m *testing.M) { stresstest.Main(m) }

// A PostgreSQL strategy is refused without a server and with a node
// fault a run on PostgreSQL does not inject; a Redis strategy is refused
// on PostgreSQL, and PostgreSQL's session kill on Redis.
func TestPGOptions(t *testing.T) {
	t.Parallel()
	s := &postgres.Node{NodeName: "n1", Server: &pgproc.Server{}} // never started: every case is refused first
	for name, o := range map[string]stress.Options{
		"no server":   {Strategy: "pg-advisory"},
		"node fault":  {Strategy: "pg-advisory", Store: s, Faults: []fault.Fault{fault.Restart}},
		"redis on pg": {Strategy: "set-nx-px", Store: s},
		"kill":        {Strategy: "set-nx-px", Store: &redis.StressServers{Nodes: []locklab.ConnSource{nil}}, Faults: []fault.Fault{fault.Kill}},
	} {
		_, err := stress.Run(context.Background(), o)
		assert.True(t, errors.Is(err, locklab.ErrInvalid), "%s: %v, want ErrInvalid", name, err)
	}
}

// The CLI's spelling of the fault that kills a PostgreSQL server's client
// sessions is a node fault stress knows once the store is registered.
func TestParseKill(t *testing.T) {
	fs, err := stress.ParseFaults([]string{"kill"})
	require.NoError(t, err)
	assert.Equal(t, []fault.Fault{fault.Kill}, fs)
}

// The three PostgreSQL locks under clients that pause past the TTL and
// crash: the session locks (pg-for-update, pg-advisory) hold while their
// session lives, whatever the TTL, so a paused holder keeps the others
// out and a crashed one's session ends with it; the lock table's row
// expires under a paused holder, and the next one overlaps it and loses
// its update (it has no fence). Each run goes on for 300 cycles, which
// hold some 15 pauses (none at all: a chance of 2e-7), and pg-lock-table's
// until the next client has taken a paused holder's expired row, which a
// loaded machine may be too slow to do in the pause; the Duration is a
// deadline.
func TestPGStress(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a PostgreSQL server for several seconds")
	}
	t.Parallel()
	srv := &postgres.Node{NodeName: "n1", Server: pgtest.Start(t, pgproc.Options{})}
	for _, name := range []string{"pg-for-update", "pg-advisory", "pg-lock-table"} {
		rep := stresstest.Until(t, stress.Options{
			Strategy: name, Store: srv, Clients: 4, Duration: 2 * time.Minute, TTL: 100 * time.Millisecond,
			PauseProb: 0.05, CrashProb: 0.01, Seed: 3, Key: "stress:" + name,
		}, func(p stress.Progress) bool {
			return p.Cycles >= 300 && (name != "pg-lock-table" || p.Violations > 0)
		})
		t.Logf("%s: %d cycles, %d pauses, %d crashes, %d overlaps, %d lost updates, %d errors (%s)",
			name, rep.Cycles, rep.Pauses, rep.Crashes, rep.Overlaps, rep.LostUpdates, rep.Errors, rep.FirstError)
		assert.Positive(t, rep.Cycles, name)
		assert.Positive(t, rep.Pauses, name)
		assert.Empty(t, rep.Liveness, name)
		if name == "pg-lock-table" {
			assert.Positive(t, rep.Overlaps, "a paused holder's row expires under it")
			assert.True(t, rep.Violated())
			continue
		}
		assert.Zero(t, rep.Overlaps, name)
		assert.Zero(t, rep.LostUpdates, name)
		assert.False(t, rep.Violated(), name)
	}
}

// pg-advisory across server restarts, partitions and killed sessions,
// with holders paused inside the critical section: each ends the paused
// holder's session
// and its lock, the next client takes the lock, and the paused one, woken,
// works on as if it held it. The lock is safe only while its session
// lives. After a restart the clients take long to serve again (hundreds
// of errors a run), on a loaded machine longer than a pause lasts: there
// the next client often has not taken the lock before the paused one
// wakes, so a restart's overlaps are logged, not required. Each run goes
// on until two faults are over and the clients have taken the lock after
// them, and, but for the restart's, until the first overlap: a fault that
// strikes during a pause (each lasts 1.5s, 3 x TTL) ends the paused
// holder's session, but the next client may be too slow to take the lock
// before the pause ends, so that it takes several pauses on a loaded
// machine. The Duration is a deadline.
func TestPGStressSessionEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts and partitions a PostgreSQL server for several seconds")
	}
	t.Parallel()
	srv := &postgres.Node{NodeName: "n1", Server: pgtest.Start(t, pgproc.Options{})}
	for _, kind := range []fault.Fault{fault.RestartKeep, fault.Partition, fault.Kill} {
		after := stresstest.AfterFaults(2, 10)
		rep := stresstest.Until(t, stress.Options{
			Strategy: "pg-advisory", Store: srv, Clients: 4, Duration: 3 * time.Minute, TTL: 500 * time.Millisecond,
			PauseProb: 0.1, CrashProb: -1, Seed: 2, Key: "stress:" + kind.String(),
			Faults: []fault.Fault{kind}, FaultEvery: time.Second, FaultFor: 200 * time.Millisecond,
		}, func(p stress.Progress) bool {
			return after(p) && (kind == fault.RestartKeep || p.Violations > 0)
		})
		t.Logf("%v: %d cycles, %d pauses, %d overlaps, %d lost updates, %d errors, node faults %+v",
			kind, rep.Cycles, rep.Pauses, rep.Overlaps, rep.LostUpdates, rep.Errors, rep.NodeFaults)
		assert.Positive(t, rep.Cycles, kind)
		require.NotEmpty(t, rep.NodeFaults, kind)
		for _, f := range rep.NodeFaults {
			assert.Empty(t, f.Err, "%v on %s", f.Kind, f.Node)
		}
		if kind != fault.RestartKeep {
			assert.Positive(t, rep.Pauses, kind)
			assert.Positive(t, rep.Overlaps, "%v ends a paused holder's session, and the next client takes its lock", kind)
		}
	}
}

// pg-advisory with each client a process: a pause is SIGSTOP, which keeps
// the paused holder's session and so its lock; a crash is SIGKILL, whose
// connections close and whose session, with its lock, ends. The run goes
// on for 100 cycles, with some 8 crashes (a cycle is four events, each
// followed by a crash one time in fifty). The stuck window is far longer
// than the default 2s, which a loaded machine's workers, each started
// anew after a crash, can spend without a lock: a lock nobody can take
// stays so much longer.
func TestPGStressProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes on a PostgreSQL server for several seconds")
	}
	t.Parallel()
	srv := &postgres.Node{NodeName: "n1", Server: pgtest.Start(t, pgproc.Options{})}
	rep, err := stress.Run(context.Background(), stress.Options{
		Strategy: "pg-advisory", Store: srv, Clients: 3, Cycles: 100, Duration: 2 * time.Minute,
		Stuck: 10 * time.Second, PauseProb: 0.05, CrashProb: 0.02, Seed: 5,
		Processes: true, WorkerCommand: stresstest.WorkerCommand(t),
	})
	require.NoError(t, err)
	t.Logf("%d cycles, %d pauses, %d crashes, %d overlaps, %d errors (%s)",
		rep.Cycles, rep.Pauses, rep.Crashes, rep.Overlaps, rep.Errors, rep.FirstError)
	stresstest.Cycles(t, rep, 100)
	assert.Zero(t, rep.Overlaps)
	assert.Zero(t, rep.LostUpdates)
	assert.Empty(t, rep.Liveness)
}

// pg-advisory across failovers: the primary is killed and its standby
// promoted, the clients' address moves to it, and a new standby starts
// for the next one. Every session ends at each failover; the clients
// reconnect to the promoted server and go on. The run goes on until two
// failovers are over and the clients have taken the lock after them; the
// Duration is a deadline.
func TestPGStressFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("fails a PostgreSQL server over to its standby for several seconds")
	}
	t.Parallel()
	srv := &postgres.Node{NodeName: "n1", Server: pgtest.Start(t, pgproc.Options{})}
	rep := stresstest.Until(t, stress.Options{
		Strategy: "pg-advisory", Store: srv, Clients: 4, Duration: 3 * time.Minute, TTL: 500 * time.Millisecond,
		PauseProb: 0.1, CrashProb: -1, Seed: 2, Key: "stress:failover",
		Faults: []fault.Fault{fault.Failover}, FaultEvery: 2 * time.Second, FaultFor: 300 * time.Millisecond,
	}, stresstest.AfterFaults(2, 10))
	t.Logf("failover: %d cycles, %d pauses, %d overlaps, %d lost updates, %d errors (%s), node faults %+v",
		rep.Cycles, rep.Pauses, rep.Overlaps, rep.LostUpdates, rep.Errors, rep.FirstError, rep.NodeFaults)
	require.NotEmpty(t, rep.NodeFaults)
	for _, f := range rep.NodeFaults {
		assert.Equal(t, fault.Failover, f.Kind)
		assert.Empty(t, f.Err, "failover of %s", f.Node)
	}
	assert.NotEqual(t, rep.NodeFaults[0].Node, rep.NodeFaults[1].Node, "the second failover strikes the promoted server")
	assert.Positive(t, rep.Cycles)
}
