package zookeeper

import (
	"context"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bench --stores gives every ZooKeeper locker a session of its own, as
// separate processes have, and none from Open.
func TestBenchContendersHaveSessions(t *testing.T) {
	n := startStressEnsemble(t)
	cfg, server, closeBench, err := bench.Open(context.Background(), n, 2)
	require.NoError(t, err)
	defer closeBench()
	assert.Nil(t, cfg.Store, "no connection shared by the lockers")
	assert.Contains(t, server, "ZooKeeper")
	seen := map[int64]bool{}
	for range 3 {
		cfg, closeC, err := bench.Contender(context.Background(), n)
		require.NoError(t, err)
		defer closeC()
		id := cfg.Store.(*zk.Conn).SessionID()
		assert.NotZero(t, id, "the session is open before the first cycle")
		assert.False(t, seen[id], "session %#x given twice", id)
		seen[id] = true
	}
}
