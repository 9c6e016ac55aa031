package locklab_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/redlock"
)

func TestRetryableMark(t *testing.T) {
	assert.NoError(t, lockkit.Retryable(nil))

	down := lockkit.Unavailable(errors.New("connection refused"))
	marked := lockkit.Retryable(down)
	assert.ErrorIs(t, marked, locklab.ErrUnavailable)
	assert.Equal(t, down.Error(), marked.Error(), "the mark adds no text")
	var re *locklab.RetryableError
	require.ErrorAs(t, marked, &re)
	assert.Same(t, marked, lockkit.Retryable(marked), "marked once")

	assert.True(t, locklab.IsRetryable(marked))
	assert.True(t, locklab.IsRetryable(locklab.ErrNotAcquired), "a refusal is always retried")
	assert.True(t, locklab.IsRetryable(&locklab.HeldError{}), "a refusal is always retried")
	assert.False(t, locklab.IsRetryable(down), "an unmarked failure is not")
	assert.False(t, locklab.IsRetryable(nil))
	assert.False(t, locklab.IsRetryable(lockkit.Retryable(lockkit.Invalid("bad"))), "bad input never is")
	assert.False(t, locklab.IsRetryable(context.Canceled))
}

// set-nx-px on an address nothing listens on: the failure is not marked, so
// Wait returns it at once instead of retrying until ctx ends.
func TestWaitReturnsUnmarkedFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	pool := locklab.NewPool(dead)
	defer pool.Close()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = locklab.Wait(ctx, l, "wait:dead", time.Second, locklab.RetryPolicy{})
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.False(t, locklab.IsRetryable(err))
	assert.NoError(t, ctx.Err(), "returned at once, not when ctx ended")
}

// Redlock marks its undecided rounds: with two of three nodes paused, Wait
// retries them until its deadline, its attempts run out, or the nodes are
// back; the error it ends with says unavailable, not refused.
func TestWaitRetriesMarkedFailures(t *testing.T) {
	srv := redistest.Start(t, 3)
	var nodes []locklab.ConnSource
	for _, s := range srv {
		nodes = append(nodes, s.Pool)
	}
	l, err := redlock.New(locklab.Config{Nodes: nodes, NodeTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	for _, s := range srv[1:] {
		require.NoError(t, s.Signal(syscall.SIGSTOP))
		t.Cleanup(func() { s.Signal(syscall.SIGCONT) })
	}
	fast := locklab.RetryPolicy{Initial: time.Millisecond, Max: 10 * time.Millisecond}

	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = locklab.Wait(short, l, "wait:marked", time.Second, fast)
	t.Log(err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, locklab.ErrUnavailable, "the last attempt failed")
	assert.NotErrorIs(t, err, locklab.ErrNotAcquired, "nobody refused")
	assert.Contains(t, err.Error(), "last attempt")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := fast
	p.Attempts = 3
	_, err = locklab.Wait(ctx, l, "wait:marked", time.Second, p)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.NotErrorIs(t, err, locklab.ErrNotAcquired)
	assert.True(t, strings.Contains(err.Error(), "after 3 attempts"), "%v", err)
	assert.NoError(t, ctx.Err(), "three attempts, not until ctx ended")

	for _, s := range srv[1:] {
		require.NoError(t, s.Signal(syscall.SIGCONT))
	}
	// The nodes are back: a Redlock with the default node timeout, since
	// 50 ms, which made the rounds above short, is not always enough for a
	// node just woken on a loaded machine.
	back, err := redlock.New(locklab.Config{Nodes: nodes})
	require.NoError(t, err)
	lease, err := locklab.Wait(ctx, back, "wait:other", time.Second, fast)
	require.NoError(t, err, "the nodes are back")
	require.NoError(t, back.Release(ctx, lease))
}
