// The title a matrix gives a scenario's row: as the stores its strategies
// lock on tell it.

package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/locklab/locklab/harness"
)

// rowTitle is the title of scenario's row in m: the scenario as told for
// the stores of the strategies it applies to (harness.ScenarioAbout.For),
// where a store that tells it its own way (a PostgreSQL server restarts
// on its data directory, not without persistence) gets its own title. One
// title where they all tell it alike; else each, after the stores it is
// told for: "... (Redis); ... (PostgreSQL and etcd)". "" for a scenario m
// says nothing about.
func rowTitle(m *harness.MatrixResult, scenario string) string {
	a, ok := m.Scenario(scenario)
	if !ok {
		return ""
	}
	var titles []string
	by := map[string][]string{}
	for _, st := range ordered(m.Strategies, strategyOrder()) {
		if c, ok := m.Cell(st, scenario); ok && c.Outcome == harness.NA {
			continue
		}
		t := a.For(st).Title
		store := harness.StoreTitle(harness.StoreOfStrategy(st))
		if _, seen := by[t]; !seen {
			titles = append(titles, t)
		}
		if !slices.Contains(by[t], store) {
			by[t] = append(by[t], store)
		}
	}
	switch len(titles) {
	case 0:
		return a.Title
	case 1:
		return titles[0]
	}
	parts := make([]string, len(titles))
	for i, t := range titles {
		parts[i] = fmt.Sprintf("%s (%s)", t, joinAnd(by[t]))
	}
	return strings.Join(parts, "; ")
}
