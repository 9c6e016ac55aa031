package cli

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
)

// TestOtherStores: naming a strategy of the postgres or the etcd family
// starts its store, runs its cases there, next to Redis's in one matrix,
// and removes it.
func TestOtherStores(t *testing.T) {
	t.Parallel()
	// Three commands, each on servers of its own: side by side.
	t.Run("demo", func(t *testing.T) {
		t.Parallel()
		out, _, err := run(t, "demo", "pause-past-ttl", "-s", "pg-lock-table,pg-advisory", "--backend", "process")
		require.NoError(t, err)
		assert.Contains(t, out, "PostgreSQL: process 127.0.0.1:")
		assert.Contains(t, out, "== pause-past-ttl on pg-lock-table: VIOLATED")
		assert.Contains(t, out, "== pause-past-ttl on pg-advisory: SAFE")
		assert.Contains(t, out, "INSERT lock_table", "a step is a SQL statement, named by its verb and table")
		assert.NotContains(t, out, "Redis:", "a demo of PostgreSQL's locks starts no Redis and names none")

		_, _, err = run(t, "demo", "pause-past-ttl", "-s", "pg-advisory", "--addr", "127.0.0.1:1")
		require.Error(t, err, "the addrs backend gives no PostgreSQL")
	})
	t.Run("explore", func(t *testing.T) {
		t.Parallel()
		out, _, err := run(t, "explore", "-x", "pause-past-ttl", "-s", "etcd-lease", "--first", "--backend", "process")
		require.NoError(t, err)
		assert.Contains(t, out, "etcd: 3 member processes")
		assert.Contains(t, out, "VIOLATED")
	})
	t.Run("matrix", func(t *testing.T) {
		t.Parallel()
		// The store cells' limit is lowered: each of etcd's failover
		// schedules waits for an election, and this checks the rows, not
		// the bound.
		out, _, err := run(t, "matrix", "-s", "set-nx-px,pg-advisory,etcd-lease", "-x", "pause-past-ttl-fenced,failover-loses-lock",
			"--backend", "process", "--json", "--store-max-schedules", "20")
		require.NoError(t, err)
		for _, s := range []string{`"strategy": "pg-advisory"`, `"strategy": "etcd-lease"`, `"strategy": "set-nx-px"`} {
			assert.Contains(t, out, s)
		}
	})
}

// TestOtherStoresDocker: on the docker backend the stores run in
// containers too, and are removed with the Redis nodes.
func TestOtherStoresDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("containers of the etcd or PostgreSQL images: the full run's (CI, make test-long)")
	}
	if _, err := dockerbox.Connect(context.Background()); err != nil {
		t.Skipf("docker backend: %v", err)
	}
	out, _, err := run(t, "demo", "pause-past-ttl", "-s", "pg-advisory,etcd-lease", "--backend", "docker")
	require.NoError(t, err)
	assert.Contains(t, out, "PostgreSQL: container locklab-")
	assert.Contains(t, out, "etcd: 3 containers (network locklab-")
	assert.NotContains(t, out, "Redis:", "no Redis starts where no strategy locks on it")
	assert.Contains(t, out, "== pause-past-ttl on pg-advisory: SAFE")
	assert.Contains(t, out, "== pause-past-ttl on etcd-lease: VIOLATED")
	cs, ns, err := dockerbox.Owned(context.Background(), os.Getpid(), "")
	require.NoError(t, err)
	assert.Empty(t, cs, "containers left")
	assert.Empty(t, ns, "networks left")
}
