package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/etcd"
	"github.com/locklab/locklab/stores/postgres"
	"github.com/locklab/locklab/stores/zookeeper"
)

// TestBenchStores runs bench --stores on real servers of every store, with
// counts small enough for -short, and checks that every row was measured
// and has every figure: cycles, contended locks and waits. (No timing is
// asserted: the machine may be loaded.)
func TestBenchStores(t *testing.T) {
	t.Parallel()
	for _, st := range []string{etcd.Name, postgres.Name} {
		require.NoError(t, stores.Installed(st), "bench --stores %s needs its servers here", st)
	}
	out, errOut, err := run(t, "bench", "--backend", "process", "--stores", "postgres,redis,etcd",
		"--cycles", "10", "--rounds", "1", "--contenders", "3", "--contend-time", "250ms", "--json")
	require.NoError(t, err, errOut)
	var rep storesReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)

	var got, names []string
	for _, s := range rep.Servers {
		got = append(got, s.Store)
		assert.NotEmpty(t, s.Describe, s.Store)
	}
	assert.Equal(t, []string{"redis", "etcd", "postgres"}, got, "a server per store, in the rows' order whatever the flag's")
	for _, r := range rep.Rows {
		names = append(names, r.Name)
		assert.Empty(t, r.Skipped, r.Name)
		assert.Positive(t, r.CycleMeanNs, "%s: cycle mean", r.Name)
		assert.Positive(t, r.CycleP50Ns, "%s: cycle p50", r.Name)
		assert.GreaterOrEqual(t, r.CycleP99Ns, r.CycleP50Ns, "%s: cycle p99", r.Name)
		assert.Positive(t, r.CycleRatio, "%s: ratio", r.Name)
		assert.Positive(t, r.Locks, "%s: contended locks", r.Name)
		assert.Positive(t, r.LocksPerSecond, "%s: locks per second", r.Name)
		assert.Positive(t, r.WaitP50Ns, "%s: wait p50", r.Name)
		assert.GreaterOrEqual(t, r.WaitP99Ns, r.WaitP50Ns, "%s: wait p99", r.Name)
	}
	assert.Equal(t, []string{"set-nx-px", "redlock (3 masters)", "redlock (5 masters)", "etcd-lease",
		"pg-lock-table", "pg-for-update", "pg-advisory"}, names)
	require.NotEmpty(t, rep.Rows)
	assert.InDelta(t, 1, rep.Rows[0].CycleRatio, 1e-9, "the ratios are to the first row")

	// The text table has the same rows.
	out, errOut, err = run(t, "bench", "--backend", "process", "--stores", "redis",
		"--cycles", "5", "--rounds", "1", "--contenders", "2", "--contend-time", "100ms")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "x set-nx-px")
	for _, n := range names[:3] {
		assert.Contains(t, out, n)
	}
}

// TestBenchStoresSkipsMissing: the rows of a store whose servers are not
// installed are skipped, saying why, and nothing of it starts; a run whose
// every row was skipped measured nothing, and exits 2 saying so.
func TestBenchStoresSkipsMissing(t *testing.T) {
	t.Setenv("LOCKLAB_ETCD", "/nonexistent/etcd")
	t.Setenv("LOCKLAB_PG_BINDIR", t.TempDir())
	out, errOut, err := run(t, "bench", "--stores", "etcd,postgres", "--json")
	require.EqualError(t, err, "no lock was measured: every row was skipped", errOut)
	var rep storesReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Empty(t, rep.Servers)
	require.Len(t, rep.Rows, 4)
	for _, r := range rep.Rows {
		assert.True(t, strings.HasPrefix(r.Skipped, r.Store+" is not installed: "), r.Skipped)
		assert.Zero(t, r.CycleMeanNs)
	}
	assert.Contains(t, rep.Rows[0].Skipped, "LOCKLAB_ETCD")

	code, out, errOut := runStatus(t, "bench", "--stores", "etcd")
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "etcd etcd-lease: skipped, etcd is not installed: ")
	assert.Equal(t, "locklab: no lock was measured: every row was skipped\n", errOut)
}

// TestBenchStoresMaxConnections: more PostgreSQL contenders than the
// server takes connections for are refused in one line, before any is
// measured, not once per contender the server turns away.
func TestBenchStoresMaxConnections(t *testing.T) {
	if err := stores.Installed(postgres.Name); err != nil {
		t.Skip(err)
	}
	code, out, stderr := runStatus(t, "bench", "--backend", "process", "--stores", "postgres", "--contenders", "300",
		"--cycles", "5", "--rounds", "1", "--contend-time", "100ms")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Equal(t, "locklab: --contenders 300: the PostgreSQL server takes 100 connections (max_connections), "+
		"and --stores postgres opens up to 2 a contender and 4 more: give at most 48\n", stderr)
}

// TestBenchStoresRequestsPerCycle: bench --stores zookeeper counts, for
// each ZooKeeper lock, the requests its contenders sent per lock cycle,
// and reports them with the counts they come from. How those figures grow
// with the waiters (the herd effect of zk-ephemeral, one wake a release of
// zk-recipe and zk-golib) depends on how many contenders are waiting at
// each release, which is the machine's timing: the bench shows it, and
// strategies/zklock's TestHerd proves it on each waiter's wire, one
// release with every waiter's watch set. Here only what the counts are
// made of is asserted.
func TestBenchStoresRequestsPerCycle(t *testing.T) {
	t.Parallel()
	require.NoError(t, stores.Installed(zookeeper.Name), "bench --stores zookeeper needs its servers here")
	out, errOut, err := run(t, "bench", "--backend", "process", "--stores", "zookeeper",
		"--cycles", "5", "--rounds", "1", "--contenders", "4", "--contend-time", "500ms", "--json")
	require.NoError(t, err, errOut)
	var rep storesReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	var names []string
	for _, r := range rep.Rows {
		names = append(names, r.Name)
		assert.True(t, r.WaitsInLock, "%s: its contenders wait in Lock", r.Name)
		assert.Positive(t, r.LockCycles, "%s: lock cycles", r.Name)
		// A cycle is at least an acquire's request and a release's.
		assert.GreaterOrEqual(t, r.Requests, 2*r.LockCycles, "%s: requests", r.Name)
		assert.InDelta(t, float64(r.Requests)/float64(r.LockCycles), r.RequestsPerCycle, 1e-9, r.Name)
	}
	assert.ElementsMatch(t, []string{"zk-recipe", "zk-ephemeral", "zk-golib"}, names)
	t.Logf("requests per lock cycle, 4 contenders: %+v", rep.Rows)
}
