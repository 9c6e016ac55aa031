package render_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
)

// TestTimelineAndMermaidGolden renders every recorded history as a text
// timeline and a Mermaid diagram and compares them with the golden files.
func TestTimelineAndMermaidGolden(t *testing.T) {
	for _, name := range recorded {
		h := loadHistory(t, name)
		file := strings.ReplaceAll(name, " ", "--")
		golden(t, file+".txt", render.Timeline(h))
		golden(t, file+".mmd", render.Mermaid(h))
	}
}

// TestTimelineShowsTheViolation: the C1/C2 run's timeline marks the double
// hold, stays within 100 columns, and names tokens after their writers;
// the Mermaid diagram marks the violation too.
func TestTimelineShowsTheViolation(t *testing.T) {
	h := loadHistory(t, "stale-recovery setnx-del")
	require.Equal(t, harness.Violated, h.Verdict.Outcome)
	tl := render.Timeline(h)
	assert.Contains(t, tl, "!! c1 and c2 hold the lock at once")
	assert.Contains(t, tl, "c3's", "a token is named after its writer")
	for _, line := range strings.Split(tl, "\n") {
		assert.LessOrEqual(t, len(line), 100, "timeline line wider than 100 columns: %q", line)
	}
	assert.Contains(t, render.Mermaid(h), "VIOLATION: c1 and c2 hold the lock at once")

	safe := loadHistory(t, "stale-recovery setnx-getset")
	require.Equal(t, harness.Safe, safe.Verdict.Outcome)
	assert.NotContains(t, render.Timeline(safe), "!!")
	assert.NotContains(t, render.Mermaid(safe), "VIOLATION")
}

// TestLabelsAreShared: the HTML sequence diagram names values as the text
// timeline does (a timestamp as its offset from the epoch).
func TestLabelsAreShared(t *testing.T) {
	h := loadHistory(t, "stale-recovery setnx-getset")
	tl := render.Timeline(h)
	require.Contains(t, tl, "@", "the timeline shows stamps as offsets")
	m := &harness.MatrixResult{Strategies: []string{h.Strategy}, Scenarios: []string{h.Scenario},
		Cells: []harness.Cell{{Strategy: h.Strategy, Scenario: h.Scenario, Outcome: h.Verdict.Outcome, Counterexample: h}}}
	var buf bytes.Buffer
	require.NoError(t, render.HTML(&buf, m, render.Meta{}))
	assert.Contains(t, buf.String(), `class="seq-key-text" x=`)
	assert.Regexp(t, `seq-key-text[^>]*>@`, buf.String(), "the sequence diagram shows stamps as offsets too")
}

// TestHistoryJSONRoundTrip: a recorded history survives JSON as the
// renderers see it.
func TestHistoryJSONRoundTrip(t *testing.T) {
	h := loadHistory(t, "release-after-expiry set-nx-px-del")
	var buf bytes.Buffer
	require.NoError(t, render.JSON(&buf, h))
	var back harness.History
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	assert.Equal(t, render.Timeline(h), render.Timeline(&back))
	assert.NotEmpty(t, back.WrongRelease, "the wrongful release is kept")
}

// TestMatrixGolden renders the recorded matrix for a terminal and as
// Markdown.
func TestMatrixGolden(t *testing.T) {
	m := loadMatrix(t)
	var buf bytes.Buffer
	require.NoError(t, render.MatrixText(&buf, m))
	golden(t, "matrix.txt", buf.String())
	golden(t, "matrix.md", render.MatrixMarkdown(m, 2, matrixSchedules))
	v, ok := m.Cell(violatedCell[0], violatedCell[1])
	require.True(t, ok)
	assert.Contains(t, buf.String(), fmt.Sprintf("%s × %s: VIOLATED", v.Strategy, v.Scenario))
}

// The counts of schedules show per cell, run and the plain enumeration's,
// with "?" where the plain enumeration was not counted.
func TestMatrixCounts(t *testing.T) {
	m := &harness.MatrixResult{Strategies: []string{"set-nx-px", "incr-expire-multi"}, Scenarios: []string{"stale-recovery"},
		Cells: []harness.Cell{
			{Strategy: "set-nx-px", Scenario: "stale-recovery", Outcome: harness.Safe, Complete: true, Schedules: 257, Naive: 257},
			{Strategy: "incr-expire-multi", Scenario: "stale-recovery", Outcome: harness.Safe, Complete: true, Schedules: 257},
		}}
	md := render.MatrixMarkdown(m, 2, 3000)
	assert.Contains(t, md, "| `stale-recovery` | 257 / ? | 257 / 257 |")
	assert.Contains(t, md, "In all: 514 schedules run, 257 in the plain enumeration. ?: not counted")
	assert.Contains(t, md, "every schedule of every cell within it explored")
	var buf bytes.Buffer
	require.NoError(t, render.MatrixText(&buf, m))
	assert.Regexp(t, `incr-expire-multi\s+stale-recovery\s+257 / \?`, buf.String())
	assert.Regexp(t, `set-nx-px\s+stale-recovery\s+257 / 257`, buf.String())
}

// The summary of a row names each outcome's columns and writes the
// majority as "every other one"; a safe* cell stays marked, and the
// legend names the limit that stopped each safe* cell.
func TestMatrixSummaryAndLimits(t *testing.T) {
	m := &harness.MatrixResult{
		Strategies: []string{"setnx-del", "set-nx-px", "incr-expire", "redlock"},
		Scenarios:  []string{"stale-recovery", "failover-loses-lock"},
		Cells: []harness.Cell{
			{Strategy: "setnx-del", Scenario: "stale-recovery", Outcome: harness.Violated, Schedule: "c1 c2"},
			{Strategy: "set-nx-px", Scenario: "stale-recovery", Outcome: harness.Safe, Complete: true},
			{Strategy: "incr-expire", Scenario: "stale-recovery", Outcome: harness.Safe, Complete: true},
			{Strategy: "redlock", Scenario: "stale-recovery", Outcome: harness.Safe, Limit: 300, Schedules: 301},
			{Strategy: "setnx-del", Scenario: "failover-loses-lock", Outcome: harness.Violated, Schedule: "c1"},
			{Strategy: "set-nx-px", Scenario: "failover-loses-lock", Outcome: harness.Violated, Schedule: "c1"},
			{Strategy: "incr-expire", Scenario: "failover-loses-lock", Outcome: harness.Safe, Limit: 6, Schedules: 7},
			{Strategy: "redlock", Scenario: "failover-loses-lock", Outcome: harness.NA},
		}}
	sum := render.MatrixSummary(m)
	assert.Contains(t, sum, "- `stale-recovery`: **VIOLATED** on `setnx-del`; safe on every other one (3) "+
		"(safe\\* on `redlock`: the search stopped at its limit).\n")
	assert.Contains(t, sum, "- `failover-loses-lock`: safe on `incr-expire` (safe\\*); **VIOLATED** on every other one (2).\n")
	md := render.MatrixMarkdown(m, 2, 300)
	assert.Contains(t, md, "at most 300 schedules per cell, fewer where safe\\* below says")
	assert.Contains(t, md, "300 schedules for `stale-recovery` on `redlock`; 6 schedules for `failover-loses-lock` on `incr-expire`.")
}
