package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// locklab bench measures set-nx-px-wait, which waits for a replica's
// acknowledgement, on a master of its own with a replica; on a server the
// user gives that has none, its row is skipped with the reason, and the
// others are measured.
func TestBenchReplicaStrategy(t *testing.T) {
	t.Parallel()
	out, stderr, err := run(t, "bench", "--backend", "process", "-s", "set-nx-px,set-nx-px-wait,redlock", "--rounds", "1", "--cycles", "20")
	require.NoError(t, err, stderr)
	assert.Contains(t, out, "set-nx-px-wait on a master of its own with a replica")
	assert.Regexp(t, `set-nx-px-wait +[0-9.]+[µm]?s `, out)
	assert.Regexp(t, `redlock +[0-9.]+[µm]?s +[0-9.]+ +[0-9]+ +10\s*\n`, out, "Redlock's cycle: 5 nodes, two commands each")

	s := redistest.StartOne(t)
	out, stderr, err = run(t, "bench", "--addr", s.Addr, "-s", "set-nx-px,set-nx-px-wait", "--rounds", "1", "--cycles", "20")
	require.NoError(t, err, stderr)
	assert.Contains(t, out, "set-nx-px-wait: skipped:")
	assert.Contains(t, out, "needs a master with a replica")
	assert.Regexp(t, `\n +set-nx-px +[0-9.]+[µm]?s `, out)
}
