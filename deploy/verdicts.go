// The recorded verdict matrix: which strategies fail which scenario, and
// the shortest counterexample of each failing cell, as docs/matrix.md
// records them.

package deploy

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/locklab/locklab/strategies"
)

// verdicts.json is the generated matrix of docs/matrix.md (make docs writes
// it from real runs), read by TestVerdictsAreTheRecordedMatrix, which
// fails while the two differ and rewrites this file with -update:
//
//go:generate go test -run TestVerdictsAreTheRecordedMatrix -args -update
//go:embed verdicts.json
var verdictsJSON []byte

// The outcomes a recorded cell can have (harness.Outcome's values; a cell
// the scenario does not apply to is not recorded).
const (
	OutcomeSafe       = "SAFE"
	OutcomeViolated   = "VIOLATED"
	OutcomeDeadlock   = "DEADLOCK"
	OutcomeStarvation = "STARVATION"
)

// Verdict is one cell of the recorded matrix: a strategy on a scenario.
type Verdict struct {
	Strategy string `json:"strategy"`
	Scenario string `json:"scenario"`
	// Outcome is OutcomeSafe or a failure: OutcomeViolated,
	// OutcomeDeadlock, OutcomeStarvation.
	Outcome string `json:"outcome"`
	// Property is the property the scenario checks (harness.Property).
	Property string `json:"property"`
	// Schedule is the shortest counterexample of a failing cell.
	Schedule string `json:"schedule,omitempty"`
}

// Failed reports whether the cell is a failure of some kind.
func (v Verdict) Failed() bool { return v.Outcome != OutcomeSafe }

// Replay is the command line that replays a failing cell step by step on
// servers locklab starts (a restart or a failover needs servers it
// controls): "locklab demo SCENARIO -s STRATEGY --schedule '...'". "" for a
// safe cell.
func (v Verdict) Replay() string {
	if !v.Failed() || v.Schedule == "" {
		return ""
	}
	return fmt.Sprintf("locklab demo %s -s %s --schedule %s", v.Scenario, v.Strategy, shellQuote(v.Schedule))
}

// Matrix is the recorded verdict matrix.
type Matrix struct {
	// Strategies and Scenarios are in the order docs/matrix.md shows them.
	Strategies []string `json:"strategies"`
	Scenarios  []string `json:"scenarios"`
	// Cells are those the scenario applies to (the matrix's n/a cells are
	// left out).
	Cells []Verdict `json:"cells"`
}

// Cell returns the recorded cell of strategy on scenario; false when the
// scenario does not apply to the strategy or either is not recorded.
func (m *Matrix) Cell(strategy, scenario string) (Verdict, bool) {
	for _, c := range m.Cells {
		if c.Strategy == strategy && c.Scenario == scenario {
			return c, true
		}
	}
	return Verdict{}, false
}

var recorded = sync.OnceValues(func() (*Matrix, error) {
	var m Matrix
	if err := json.Unmarshal(verdictsJSON, &m); err != nil {
		return nil, fmt.Errorf("deploy: the recorded verdicts (verdicts.json) do not parse: %w", err)
	}
	return &m, nil
})

// Verdicts returns the recorded verdict matrix, a copy the caller may
// change.
func Verdicts() Matrix {
	m, err := recorded()
	if err != nil {
		panic(err) // the embedded file is checked by the tests
	}
	return Matrix{Strategies: slices.Clone(m.Strategies), Scenarios: slices.Clone(m.Scenarios),
		Cells: slices.Clone(m.Cells)}
}

// onRedis reports whether strategy d locks on Redis: the strategies of
// other stores read Config.Store, and no Redis strategy does.
func onRedis(d strategies.Description) bool {
	return !slices.Contains(d.Options, strategies.OptStore)
}

// shellQuote writes s as a POSIX shell reads it back: as it is when it is
// plain, else in single quotes.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?;&|<>()[]{}#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
