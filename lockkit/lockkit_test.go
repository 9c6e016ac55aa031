package lockkit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/lockkit"
)

// The errors lockkit makes are the ones locklab's users test for.
func TestErrorsMatchLocklabSentinels(t *testing.T) {
	err := lockkit.Invalid("ttl %v", time.Duration(0))
	assert.ErrorIs(t, err, locklab.ErrInvalid)
	assert.EqualError(t, err, "locklab: invalid argument: ttl 0s")
	assert.False(t, locklab.IsRetryable(lockkit.Retryable(err)), "bad input is never retried")

	err = lockkit.Unavailable(context.Canceled)
	assert.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Same(t, err, lockkit.Unavailable(err), "wrapped once")
	assert.NoError(t, lockkit.Unavailable(nil))

	r := lockkit.Retryable(err)
	assert.True(t, locklab.IsRetryable(r))
	assert.ErrorIs(t, r, locklab.ErrUnavailable)
	assert.Same(t, r, lockkit.Retryable(r))
	assert.False(t, locklab.IsRetryable(errors.New("x")))
}

func TestChecks(t *testing.T) {
	ctx := context.Background()
	assert.NoError(t, lockkit.CheckAcquire(ctx, "k", time.Millisecond))
	assert.ErrorIs(t, lockkit.CheckAcquire(ctx, "", time.Second), locklab.ErrInvalid)
	assert.ErrorIs(t, lockkit.CheckAcquire(ctx, "k", 999*time.Microsecond), locklab.ErrInvalid)
	assert.ErrorIs(t, lockkit.CheckAcquire(ctx, "k", -time.Second), locklab.ErrInvalid)
	done, cancel := context.WithCancel(ctx)
	cancel()
	err := lockkit.CheckAcquire(done, "k", time.Second)
	assert.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorIs(t, err, context.Canceled)

	assert.NoError(t, lockkit.CheckLease(ctx, locklab.Lease{Key: "k"}))
	assert.ErrorIs(t, lockkit.CheckLease(ctx, locklab.Lease{}), locklab.ErrInvalid)
	assert.ErrorIs(t, lockkit.CheckLease(done, locklab.Lease{Key: "k"}), context.Canceled)
}
