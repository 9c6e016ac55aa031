package render_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/backends"
)

// The renderers are tested on histories and a matrix recorded from real
// runs and kept in testdata/, so the tests need no Redis:
//
//	go test ./harness/render -record   re-record testdata/ on redis-server processes
//	go test ./harness/render -update   rewrite the golden files from the renderers
var (
	record = flag.Bool("record", false, "re-record the histories and the matrix in testdata/ on real redis-server processes")
	update = flag.Bool("update", false, "rewrite the golden files in testdata/golden/")
)

// recorded are the runs kept in testdata/histories: "scenario strategy".
// Between them they show a double hold, a refusal, a wrongful release,
// timestamps, a starvation with its liveness probe, a refused fenced write,
// an accepted stale one, a deadlock, and a multi-node fan-out with a node
// restart.
var recorded = []string{
	"stale-recovery setnx-del",
	"stale-recovery setnx-getset",
	"clock-skew setnx-getset",
	"release-after-expiry set-nx-px-del",
	"ttl-pushed-by-waiters incr-expire-multi",
	"pause-past-ttl-fenced set-nx-px",
	"pause-past-ttl set-nx-px",
	"crash-before-expire incr-expire",
	"redlock-restart redlock",
}

// The small matrix kept in testdata/matrix.json: one node, so the Redlock
// scenario is n/a; setnx-del breaks on the C1/C2 schedule, set-nx-px
// survives it, and incr-expire deadlocks when its holder crashes between
// INCR and EXPIRE.
var (
	testStrategies = []string{"setnx-del", "incr-expire", "set-nx-px"}
	testScenarios  = []string{"stale-recovery", "release-after-expiry", "crash-before-expire", "redlock-pause"}
	violatedCell   = [2]string{"setnx-del", "stale-recovery"}
)

const matrixSchedules = 200

// recordedMatrix is testdata/matrix.json: the matrix and, since a cell's
// counterexample is not part of the matrix's JSON, each failing cell's
// history under "strategy scenario".
type recordedMatrix struct {
	Matrix          *harness.MatrixResult       `json:"matrix"`
	Counterexamples map[string]*harness.History `json:"counterexamples"`
}

func historyFile(name string) string {
	return filepath.Join("testdata", "histories", strings.ReplaceAll(name, " ", "--")+".json")
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "re-record with: go test ./harness/render -record")
	require.NoError(t, json.Unmarshal(b, v), path)
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
}

// loadHistory reads a recorded history.
func loadHistory(t *testing.T, name string) *harness.History {
	t.Helper()
	var h harness.History
	readJSON(t, historyFile(name), &h)
	return &h
}

// loadMatrix reads the recorded matrix, counterexamples attached.
func loadMatrix(t *testing.T) *harness.MatrixResult {
	t.Helper()
	var r recordedMatrix
	readJSON(t, filepath.Join("testdata", "matrix.json"), &r)
	for i := range r.Matrix.Cells {
		c := &r.Matrix.Cells[i]
		c.Counterexample = r.Counterexamples[c.Strategy+" "+c.Scenario]
	}
	return r.Matrix
}

// TestRecordTestdata re-records testdata/ from real runs when -record is
// given.
func TestRecordTestdata(t *testing.T) {
	if !*record {
		t.Skip("re-record with -record (needs redis-server)")
	}
	ctx := context.Background()
	d, err := harness.MainStore()
	require.NoError(t, err)
	s, err := d.StartNodes(ctx, harness.NodesOptions{Backend: backends.Process, N: 3, Label: t.Name()})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	nodes := s.Nodes
	for _, name := range recorded {
		sc, st, _ := strings.Cut(name, " ")
		cs, err := harness.Resolve(sc, st)
		require.NoError(t, err)
		res, err := harness.Demo(ctx, cs, nodes)
		require.NoError(t, err, name)
		writeJSON(t, historyFile(name), res.History)
	}
	m, err := harness.Matrix(ctx, harness.MatrixOptions{Nodes: nodes[:1], Strategies: testStrategies,
		Scenarios: testScenarios, MaxSchedules: matrixSchedules, Workers: 2})
	require.NoError(t, err)
	_, err = harness.Record(ctx, m, nodes[:1])
	require.NoError(t, err)
	r := recordedMatrix{Matrix: m, Counterexamples: map[string]*harness.History{}}
	for _, cell := range m.Cells {
		if cell.Counterexample != nil {
			r.Counterexamples[cell.Strategy+" "+cell.Scenario] = cell.Counterexample
		}
	}
	writeJSON(t, filepath.Join("testdata", "matrix.json"), r)
}

// golden compares got with testdata/golden/name, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "write it with: go test ./harness/render -update")
	require.Equal(t, string(want), got, "%s differs: if the change is meant, go test ./harness/render -update", path)
}
