package render_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/render"
)

// labelHistory is one client's script step and an etcd-like step, as a
// history holds them.
func labelHistory() *harness.History {
	return &harness.History{
		Strategy: "set-nx-px", Scenario: "s", Key: "lock:s", Nodes: []string{"n1"},
		Clients:      []harness.ClientInfo{{ID: 1}},
		Acquisitions: []harness.Acquisition{{Client: 1, Step: 1, Token: "75923f923ecb7f1b540f00ab1cd5bf39"}},
		Events: []harness.Event{
			{Step: 1, Label: "c1", Client: 1, Node: 1, Reply: "1", Notes: []string{"c1 acquired (fence 1)"},
				Command: []string{"EVALSHA", "set-nx-px.acquire", "lock:s", "{lock:s}:locklab:fence", "75923f923ecb7f1b540f00ab1cd5bf39", "ffffffffffffffffffff", "30000"}},
			{Step: 2, Label: "c1", Client: 1, Node: 1, Reply: "then rev 5, P/L1@5",
				Command: []string{"Txn if create(P/L1)=0 then put P/L1 lease L1, first P/"}},
		},
		Schedule: "c1 c1",
	}
}

// A script shows by name, whole; the lock key is K, inside another key
// too; a token by its writer; an opaque value is cut; the text timeline
// wraps a long command over the lines of its column instead of cutting it.
func TestLabelsNameScriptsAndWrap(t *testing.T) {
	h := labelHistory()
	m := render.Mermaid(h)
	assert.Contains(t, m, "1. EVALSHA set-nx-px.acquire K {K} locklab fence c1's fffffffff~ 30000")
	assert.Contains(t, m, "2. Txn if create(P/L1)=0 then put P/L1 lease L1, first P/")
	assert.Contains(t, m, "n1-->>c1: then rev 5, P/L1@5")

	tl := render.Timeline(h)
	assert.Contains(t, tl, "  1  c1            EVALSHA\n"+
		"                     set-nx-px.acquire K\n"+
		"                     {K}:locklab:fence\n"+
		"                     c1's fffffffff~\n"+
		"                     30000\n"+
		"                   -> 1\n"+
		"                   acquired (fence 1)\n")
	assert.Contains(t, tl, "  2  c1            Txn if create(P/L1)=0\n"+
		"                     then put P/L1 lease\n"+
		"                     L1, first P/\n"+
		"                   -> then rev 5, P/L1@5\n")
	for _, line := range strings.Split(tl, "\n") {
		assert.NotContains(t, line, "~ ", "nothing but the opaque value is cut: %q", line)
	}
}
