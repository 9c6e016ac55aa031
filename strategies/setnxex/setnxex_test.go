package setnxex_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/strategies/setnxex"
)

// The fence counters' key cannot be a lock, and a counters' key that is not
// a hash makes acquires fail without writing anything.
func TestSetNXPXFenceKeyCollision(t *testing.T) {
	srv := redistest.StartOne(t)
	l, err := setnxex.NewSetNXPX(locklab.Config{Pool: srv.Pool})
	require.NoError(t, err)
	ctx := context.Background()
	exists := func(k string) int64 {
		n, err := redis.Int64(srv.Do(t, "EXISTS", k), nil)
		require.NoError(t, err)
		return n
	}

	_, err = l.Acquire(ctx, setnxex.FenceHash, time.Minute)
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.Zero(t, exists(setnxex.FenceHash), "nothing written")

	lease, err := l.Acquire(ctx, "fence:other", time.Minute)
	require.NoError(t, err, "other keys still work")
	assert.EqualValues(t, 1, lease.Fence)
	_, err = l.Handoff(ctx, locklab.Lease{Key: setnxex.FenceHash, Token: "t"}, time.Minute)
	require.ErrorIs(t, err, locklab.ErrInvalid)
	require.NoError(t, l.Release(ctx, lease))

	// Someone else overwrites the counters with a string.
	srv.Do(t, "SET", setnxex.FenceHash, "x")
	_, err = l.Acquire(ctx, "fence:other", time.Minute)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.Contains(t, err.Error(), "fence counters")
	assert.Zero(t, exists("fence:other"), "a failed acquire leaves no lock behind")

	srv.Do(t, "DEL", setnxex.FenceHash)
	lease, err = l.Acquire(ctx, "fence:other", time.Minute)
	require.NoError(t, err)
	srv.Do(t, "SET", setnxex.FenceHash, "x")
	_, err = l.Handoff(ctx, lease, time.Minute)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	v, err := redis.String(srv.Do(t, "GET", "fence:other"), nil)
	require.NoError(t, err)
	assert.Equal(t, lease.Token, v, "a failed handoff changes nothing")
}
