package setnxex_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies/setnxex"
)

// On a master with a live replica the acquire is acknowledged and the
// replica has the lock; promoted, it refuses a second client.
func TestSetNXPXWaitSurvivesFailoverToAcknowledgingReplica(t *testing.T) {
	master := redistest.StartOne(t)
	replica := redistest.StartReplica(t, master)
	ctx := context.Background()
	l, err := setnxex.NewSetNXPXWait(locklab.Config{Pool: master.Pool})
	require.NoError(t, err)
	lease, err := l.Acquire(ctx, "w", time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 1, lease.Fence)
	// WAIT returned: the replica has applied the write.
	v, err := redis.String(replica.Do(t, "GET", "w"), nil)
	require.NoError(t, err)
	assert.Equal(t, lease.Token, v, "the replica holds the acknowledged lock")

	replica.Do(t, "REPLICAOF", "NO", "ONE") // the failover
	promoted, err := setnxex.NewSetNXPXWait(locklab.Config{Pool: replica.Pool})
	require.NoError(t, err)
	_, err = promoted.Acquire(ctx, "w", time.Minute)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the promoted replica knows the lock")
}

// Without a replica to acknowledge, the acquire fails and leaves nothing.
func TestSetNXPXWaitFailsWithoutReplica(t *testing.T) {
	master := redistest.StartOne(t)
	replica := redistest.StartReplica(t, master)
	ctx := context.Background()
	l, err := setnxex.NewSetNXPXWait(locklab.Config{Pool: master.Pool})
	require.NoError(t, err)
	// Cut the link: point the replica where nothing listens.
	replica.Do(t, "REPLICAOF", "127.0.0.1", "1")
	deadline := time.Now().Add(10 * time.Second)
	for redistest.Replicas(t, master) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.Zero(t, redistest.Replicas(t, master), "the master still counts the replica")

	_, err = l.Acquire(ctx, "w", 2*time.Second)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.NotErrorIs(t, err, locklab.ErrNotAcquired)
	assert.Contains(t, err.Error(), "no replica acknowledged")
	n, err := redis.Int64(master.Do(t, "EXISTS", "w"), nil)
	require.NoError(t, err)
	assert.Zero(t, n, "an unacknowledged lock is taken back")

	other := setnxex.WaitTimeout // a tenth of the ttl, within [50ms, 1s], at most half the ttl
	assert.Equal(t, 200*time.Millisecond, other(2*time.Second))
	assert.Equal(t, 50*time.Millisecond, other(300*time.Millisecond))
	assert.Equal(t, 40*time.Millisecond, other(80*time.Millisecond))
	assert.Equal(t, time.Second, other(time.Minute))
}
