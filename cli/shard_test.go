package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMatrixShards: matrix --shard runs its share of the cells, and
// matrix merge puts the shards' --json outputs together into the JSON and
// the text of the whole run, apart from times; it refuses what is not
// every shard once.
func TestMatrixShards(t *testing.T) {
	t.Parallel()
	args := []string{"matrix", "--backend", "process", "--nodes", "1", "-s", "setnx-del,set-nx-px,setnx-getset",
		"-x", "stale-recovery,release-after-expiry,clock-skew", "--json"}
	whole, _, err := run(t, args...)
	require.NoError(t, err)
	dir := t.TempDir()
	var files []string
	for _, sh := range []string{"1/2", "2/2"} {
		out, _, err := run(t, append(args, "--shard", sh)...)
		require.NoError(t, err)
		assert.Contains(t, out, `"shard": {`)
		f := filepath.Join(dir, strings.Replace(sh, "/", "-of-", 1)+".json")
		require.NoError(t, os.WriteFile(f, []byte(out), 0o600))
		files = append(files, f)
	}
	merged, _, err := run(t, "matrix", "merge", files[1], files[0], "--json")
	require.NoError(t, err)
	assert.Equal(t, withoutElapsed(t, whole), withoutElapsed(t, merged))

	text, _, err := run(t, "matrix", "merge", files[0], files[1])
	require.NoError(t, err)
	assert.Contains(t, text, "setnx-del × stale-recovery: VIOLATED")
	assert.NotContains(t, text, "shard")

	_, _, err = run(t, "matrix", "merge", files[0])
	require.Error(t, err)
	assert.Contains(t, err.Error(), "1 parts of a matrix in 2 shards")
	_, _, err = run(t, "matrix", "merge", files[0], files[0])
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shard 1/2 given twice")
	_, _, err = run(t, "matrix", "--shard", "3/2", "-s", "setnx-del")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--shard 3/2: must be i/n with 1 <= i <= n")
}

// withoutElapsed is a matrix --json output with its times removed.
func withoutElapsed(t *testing.T, out string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m), out)
	delete(m, "elapsed_ns")
	for _, c := range m["cells"].([]any) {
		delete(c.(map[string]any), "elapsed_ns")
	}
	return m
}
