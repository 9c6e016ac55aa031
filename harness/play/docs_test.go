package play

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlayDocsListEveryLevel: docs/play.md has a row for every level.
func TestPlayDocsListEveryLevel(t *testing.T) {
	b, err := os.ReadFile("../../docs/play.md")
	require.NoError(t, err)
	for _, l := range Levels() {
		assert.Contains(t, string(b), "| `"+l.ID+"` | `"+l.Scenario+"` on `"+l.Strategy+"` |", "docs/play.md lacks level %s", l.ID)
	}
}

// TestWorkshopSolutions replays the answer key of docs/workshop.md: every
// level has a row, and every schedule given solves its level by clicks
// (a level on another store's servers, by TestStoreLevels' clicks).
func TestWorkshopSolutions(t *testing.T) {
	b, err := os.ReadFile("../../docs/workshop.md")
	require.NoError(t, err)
	text := string(b)
	i := strings.Index(text, "<!-- play-solutions")
	require.GreaterOrEqual(t, i, 0, "no answer key in docs/workshop.md")
	key := text[i:]
	key = key[:strings.Index(key, "\n\n")]
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\| (.*) \\|$")
	sched := regexp.MustCompile("^`([^`]+)`")
	rows := row.FindAllStringSubmatch(key, -1)
	seen := map[string]bool{}
	ts := newTestServer(t, Options{})
	for _, m := range rows {
		id := m[1]
		seen[id] = true
		l, ok := level(id)
		require.True(t, ok, "the answer key names an unknown level %q", id)
		s := sched.FindStringSubmatch(m[2])
		if s == nil {
			assert.True(t, l.Safe, "level %s: no schedule in the answer key", id)
			continue
		}
		if l.Store != "" {
			// TestStoreLevels plays it on the store's servers, in one
			// session, and checks that it wins.
			assert.True(t, slices.ContainsFunc(storeLevelRuns, func(r storeLevelRun) bool {
				return r.level == id && r.won && r.schedule == s[1]
			}), "level %s: the answer key's %q is not a winning schedule TestStoreLevels plays", id, s[1])
			continue
		}
		t.Run(id, func(t *testing.T) {
			r := ts.create(id)
			defer ts.post("/api/end", map[string]any{"session": r.Session}, nil)
			for k, st := range strings.Fields(s[1]) {
				var a response
				require.Equal(t, http.StatusOK, ts.post("/api/step", stepReq(r.Session, r.Seq, st), &a), "step %d (%s)", k+1, st)
				r = a
			}
			assert.True(t, r.Solved, "%s does not solve %s:\n%s", s[1], id, r.Timeline)
		})
	}
	for _, l := range Levels() {
		assert.True(t, seen[l.ID], "the answer key lacks level %s", l.ID)
	}
}
