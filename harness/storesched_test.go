package harness

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/locklab/locklab/harness/fault"
)

// TestStoreTurns: the store with the most cells that fault a server takes
// the first turn, then the one with the most cells, then by name; the
// order does not depend on the map's.
func TestStoreTurns(t *testing.T) {
	plain := &Scenario{Name: "plain"}
	restart := &Scenario{Name: "restart", Needs: []fault.Fault{fault.Restart}}
	jobs := func(plains, faults int) []cellJob {
		var js []cellJob
		for range plains {
			js = append(js, cellJob{cs: Case{Scenario: plain}})
		}
		for range faults {
			js = append(js, cellJob{cs: Case{Scenario: restart}})
		}
		return js
	}
	byStore := map[string][]cellJob{
		"a": jobs(9, 1), // most cells, fewest faults
		"b": jobs(2, 2),
		"c": jobs(3, 2), // as many faults as b, more cells
		"d": jobs(1, 2), // as many as b, fewer cells
		"e": jobs(2, 2), // b's twin: by name after it
	}
	for range 20 {
		assert.Equal(t, []string{"c", "b", "e", "d", "a"}, storeTurns(byStore))
	}
	assert.Empty(t, storeTurns(nil))
}
