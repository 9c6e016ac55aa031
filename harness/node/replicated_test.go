package node

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each run starts with master and replica alike and the link cut; a
// failover loses what the master took since, and the next Prepare brings
// the pair back.
func TestReplicatedFailoverLosesWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be string) {
		ctx := ctxT(t)
		c := start(t, Options{Backend: be, N: 1})
		r, err := c.Replicated(ctx, c.Nodes()[0])
		require.NoError(t, err)
		assert.Equal(t, "n1", r.Name())
		for round := 0; round < 3; round++ {
			require.NoError(t, r.Prepare(ctx))
			master := r.current()
			_, err := master.Do(ctx, "SET", "lock", "c1")
			require.NoError(t, err)
			require.NoError(t, r.Failover(ctx))
			promoted := r.current()
			assert.NotEqual(t, master.Addr(), r.Addr(), "round %d: clients follow the promoted replica", round)
			_, ok := get(t, promoted, "lock")
			assert.False(t, ok, "round %d: the promoted replica must lack the write made after the cut", round)
			role, err := promoted.Role(ctx)
			require.NoError(t, err)
			assert.Equal(t, "master", role)
			role, err = master.Role(ctx)
			require.NoError(t, err)
			assert.Equal(t, "slave", role, "round %d: the old master is demoted", round)
			_, err = master.Do(ctx, "SET", "late", "write")
			require.Error(t, err, "round %d: the demoted master refuses writes", round)
		}
		require.NoError(t, r.Prepare(ctx))
	})
}
