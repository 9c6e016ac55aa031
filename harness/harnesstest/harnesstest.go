// Package harnesstest holds what the tests of the harness's stores share:
// resolving a case, and reading a history's notes.
package harnesstest

import (
	"slices"
	"strings"
	"testing"

	"github.com/locklab/locklab/harness"
)

// Case resolves scenario on strategy, or fails the test.
func Case(t testing.TB, scenario, strategy string) harness.Case {
	t.Helper()
	c, err := harness.Resolve(scenario, strategy)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Noted reports whether a note of one of h's events begins with prefix.
func Noted(h *harness.History, prefix string) bool {
	for _, e := range h.Events {
		if slices.ContainsFunc(e.Notes, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
			return true
		}
	}
	return false
}
