package deploy

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	_ "github.com/locklab/locklab/stores/redis" // the Redis store's Driver says which locks a guarded write applies to
	"github.com/locklab/locklab/strategies"
)

var update = flag.Bool("update", false, "rewrite verdicts.json from docs/matrix.md")

// matrixDoc is the page whose generated matrix region verdicts.json copies.
const matrixDoc = "../docs/matrix.md"

// TestVerdictsAreTheRecordedMatrix reads the verdict matrix that make docs
// generated into docs/matrix.md from real runs (and that tools/docgen's
// test keeps in step with the code), and fails when verdicts.json, which
// the check embeds, says anything else: every cell's outcome, property and
// counterexample. With -update (go generate) it rewrites verdicts.json.
func TestVerdictsAreTheRecordedMatrix(t *testing.T) {
	src, err := os.ReadFile(matrixDoc)
	require.NoError(t, err)
	doc, err := parseMatrixDoc(src)
	require.NoError(t, err)
	want, err := json.MarshalIndent(doc, "", "\t")
	require.NoError(t, err)
	want = append(want, '\n')
	if *update {
		require.NoError(t, os.WriteFile("verdicts.json", want, 0o644))
		t.Logf("verdicts.json rewritten from %s: %d cells", matrixDoc, len(doc.Cells))
		return
	}
	if !bytes.Equal(want, verdictsJSON) {
		got := Verdicts()
		for _, c := range doc.Cells {
			r, ok := got.Cell(c.Strategy, c.Scenario)
			assert.True(t, ok && r == c, "%s × %s: docs/matrix.md records %+v, verdicts.json %+v", c.Strategy, c.Scenario, c, r)
		}
		assert.Equal(t, doc.Strategies, got.Strategies)
		assert.Equal(t, doc.Scenarios, got.Scenarios)
		assert.Len(t, got.Cells, len(doc.Cells))
		t.Fatalf("verdicts.json is not the matrix recorded in %s: run go generate ./deploy", matrixDoc)
	}
}

// The recorded matrix covers the catalog and the registry as they are:
// a scenario or a Redis strategy added since the docs were generated
// fails here until make docs and go generate have run.
func TestVerdictsCoverCatalogAndRegistry(t *testing.T) {
	m := Verdicts()
	// The recorded matrix is docs/matrix.md's Redis table: every scenario
	// that applies to a Redis strategy.
	var scs []string
	for _, sc := range harness.Scenarios() {
		for _, name := range redisStrategies(strategies.Names()) {
			if d, err := strategies.Info(name); err == nil && sc.AppliesTo(d) {
				scs = append(scs, sc.Name)
				break
			}
		}
	}
	assert.ElementsMatch(t, scs, m.Scenarios, "the catalog and the recorded matrix differ: run make docs, then go generate ./deploy")
	assert.ElementsMatch(t, redisStrategies(strategies.Names()), redisStrategies(m.Strategies),
		"the registry's Redis strategies and the recorded matrix's differ: run make docs, then go generate ./deploy")
	assert.Equal(t, redisStrategies(m.Strategies), Strategies())
	for _, c := range m.Cells {
		sc, err := harness.Lookup(c.Scenario)
		require.NoError(t, err)
		d, err := strategies.Info(c.Strategy)
		require.NoError(t, err)
		assert.True(t, sc.AppliesTo(d), "%s × %s is recorded, and the scenario does not apply", c.Strategy, c.Scenario)
		assert.Equal(t, string(sc.Property), c.Property, "%s × %s", c.Strategy, c.Scenario)
		if c.Failed() {
			_, err := harness.ParseSchedule(c.Schedule)
			assert.NoError(t, err, "%s × %s: %q", c.Strategy, c.Scenario, c.Schedule)
			assert.NotEmpty(t, c.Schedule, "%s × %s failed without a counterexample", c.Strategy, c.Scenario)
		}
	}
}

// redisStrategies are the names of strategies that lock on Redis.
func redisStrategies(names []string) []string {
	var out []string
	for _, n := range names {
		if d, err := strategies.Info(n); err == nil && onRedis(d) {
			out = append(out, n)
		}
	}
	return out
}

func TestReplayQuotesTheSchedule(t *testing.T) {
	v := Verdict{Strategy: "set-nx-px", Scenario: "restart-loses-lock", Outcome: OutcomeViolated, Schedule: "c1 c1 restart(n1) c2"}
	assert.Equal(t, "locklab demo restart-loses-lock -s set-nx-px --schedule 'c1 c1 restart(n1) c2'", v.Replay())
	v.Outcome = OutcomeSafe
	assert.Empty(t, v.Replay())
}

// parseMatrixDoc reads the generated matrix region of docs/matrix.md
// (render.MatrixMarkdown): the table of outcomes, one row per scenario and
// one column per strategy, and the list of shortest counterexamples.
func parseMatrixDoc(src []byte) (*Matrix, error) {
	text := string(src)
	_, region, ok := strings.Cut(text, "<!-- generated:matrix -->")
	if !ok {
		return nil, fmt.Errorf("%s has no generated matrix", matrixDoc)
	}
	region, _, ok = strings.Cut(region, "<!-- end -->")
	if !ok {
		return nil, fmt.Errorf("%s: the generated matrix has no end", matrixDoc)
	}
	lines := strings.Split(region, "\n")
	m := &Matrix{}
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "| scenario | checks |") })
	if i < 0 {
		return nil, fmt.Errorf("%s: no verdict table", matrixDoc)
	}
	ticked := regexp.MustCompile("`([^`]+)`")
	for _, f := range cells(lines[i])[2:] {
		s := ticked.FindStringSubmatch(f)
		if s == nil {
			return nil, fmt.Errorf("%s: header cell %q names no strategy", matrixDoc, f)
		}
		m.Strategies = append(m.Strategies, s[1])
	}
	outcome := map[string]string{"safe": OutcomeSafe, `safe\*`: OutcomeSafe, "**VIOLATED**": OutcomeViolated,
		"**DEADLOCK**": OutcomeDeadlock, "**STARVATION**": OutcomeStarvation}
	index := map[[2]string]int{}
	for _, l := range lines[i+2:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		fs := cells(l)
		if len(fs) != 2+len(m.Strategies) {
			return nil, fmt.Errorf("%s: row %q has %d cells, want %d", matrixDoc, l, len(fs), 2+len(m.Strategies))
		}
		s := ticked.FindStringSubmatch(fs[0])
		if s == nil {
			return nil, fmt.Errorf("%s: row %q names no scenario", matrixDoc, l)
		}
		sc := s[1]
		m.Scenarios = append(m.Scenarios, sc)
		for j, f := range fs[2:] {
			if f == "·" {
				continue
			}
			o, ok := outcome[f]
			if !ok {
				return nil, fmt.Errorf("%s: %s × %s: unknown cell %q", matrixDoc, m.Strategies[j], sc, f)
			}
			index[[2]string{m.Strategies[j], sc}] = len(m.Cells)
			m.Cells = append(m.Cells, Verdict{Strategy: m.Strategies[j], Scenario: sc, Outcome: o, Property: fs[1]})
		}
	}
	// - `scenario`
	//   - `strategy`: OUTCOME (property) — `schedule`
	example := regexp.MustCompile("^  - `([^`]+)`: ([A-Z]+) \\(([^)]+)\\) — `([^`]+)`$")
	scenario := regexp.MustCompile("^- `([^`]+)`$")
	sc := ""
	for _, l := range lines {
		if s := scenario.FindStringSubmatch(l); s != nil {
			sc = s[1]
			continue
		}
		s := example.FindStringSubmatch(l)
		if s == nil {
			continue
		}
		k, ok := index[[2]string{s[1], sc}]
		if !ok {
			return nil, fmt.Errorf("%s: a counterexample of %s × %s, a cell the table does not record", matrixDoc, s[1], sc)
		}
		c := &m.Cells[k]
		if c.Outcome != s[2] || c.Property != s[3] {
			return nil, fmt.Errorf("%s: %s × %s is %s (%s) in the table and %s (%s) in the counterexamples",
				matrixDoc, s[1], sc, c.Outcome, c.Property, s[2], s[3])
		}
		c.Schedule = s[4]
	}
	for _, c := range m.Cells {
		if c.Failed() && c.Schedule == "" {
			return nil, fmt.Errorf("%s: %s × %s is %s without a counterexample", matrixDoc, c.Strategy, c.Scenario, c.Outcome)
		}
	}
	return m, nil
}

// cells splits a Markdown table row into its trimmed cells.
func cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(strings.TrimSuffix(row, "|"), "|")
	fs := strings.Split(row, "|")
	for i, f := range fs {
		fs[i] = strings.TrimSpace(f)
	}
	return fs
}

// A Sentinel group of one Sentinel and one replica reads in the singular.
func TestJudgeFailoverSingular(t *testing.T) {
	for _, c := range []struct {
		sentinels, replicas int
		want                string
	}{
		{1, 1, "1 Sentinel watches master locks at h:1 and promotes its replica when it fails; "},
		{3, 1, "3 Sentinels watch master locks at h:1 and promote its replica when it fails; "},
		{1, 2, "1 Sentinel watches master locks at h:1 and promotes one of its 2 replicas when it fails; "},
	} {
		f := &facts{sentinel: &SentinelMaster{Name: "locks", Addr: "h:1", Sentinels: c.sentinels, Replicas: c.replicas}}
		st, finding := judgeFailover(f, Options{}, map[string]string{})
		if st != Exposed || !strings.HasPrefix(finding, c.want) {
			t.Errorf("%d Sentinels, %d replicas: %s %q, want %s", c.sentinels, c.replicas, st, finding, c.want)
		}
	}
}

// A clock offset beyond MaxSkew is never "within" it: beyond it by more
// than the measurement's uncertainty it is exposed, by less it is unknown.
func TestJudgeClockBeyondMaxSkew(t *testing.T) {
	for _, c := range []struct {
		offset, uncertainty, max time.Duration
		want                     Status
		says                     string
	}{
		{-16 * time.Microsecond, 55 * time.Microsecond, time.Nanosecond, Unknown,
			"the server's clock is 16µs behind this host's (±55µs): more than 1ns as measured, but not by more than the measurement's uncertainty: a round trip of 110µs cannot tell a skew of 1ns"},
		{200 * time.Microsecond, 55 * time.Microsecond, time.Nanosecond, Exposed, "the server's clock is 200µs ahead of this host's (±55µs), more than 1ns: "},
		{-16 * time.Microsecond, 55 * time.Microsecond, 100 * time.Millisecond, NotExposed, "the server's clock is 16µs behind this host's (±55µs), within 100ms"},
	} {
		f := &facts{clock: Clock{Offset: c.offset, Uncertainty: c.uncertainty}}
		st, finding := judgeClock(f, Options{MaxSkew: c.max}, map[string]string{})
		if st != c.want || !strings.HasPrefix(finding, c.says) {
			t.Errorf("offset %v ±%v, max %v: %s %q, want %s %q", c.offset, c.uncertainty, c.max, st, finding, c.want, c.says)
		}
	}
}
