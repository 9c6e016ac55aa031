package etcdlock_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/etcd/etcdproc/etcdtest"
	"github.com/locklab/locklab/strategies/etcdlock"
)

// blackHole accepts connections and never answers: a member that hangs.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// client opens a client on endpoint, closed when the test ends.
func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(etcdproc.ClientConfig(endpoint))
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestContextCancelled(t *testing.T) {
	t.Parallel()
	lease := locklab.Lease{Key: "k", Token: etcdlock.Prefix("k") + "/1", Fence: 1}
	l := newLock(t, sharedClient(t), etcdlock.Options{})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Acquire(done, "k", time.Minute)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, l.Release(done, lease), context.Canceled)
	_, err = l.Extend(done, lease, time.Minute)
	require.ErrorIs(t, err, context.Canceled)

	// Cancelled during the call, on a member that never answers.
	hung := newLock(t, client(t, blackHole(t)), etcdlock.Options{Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = hung.Acquire(ctx, "k", time.Minute)
	require.ErrorIs(t, err, locklab.ErrUnavailable)
	require.ErrorIs(t, err, context.Canceled)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, hung.Release(ctx, lease), context.DeadlineExceeded)
}

// TestUnavailable: a cluster nobody answers for is ErrUnavailable, never a
// refusal, within the call timeout when ctx has no deadline.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := ln.Addr().String()
	ln.Close()
	lease := locklab.Lease{Key: "k", Token: etcdlock.Prefix("k") + "/1", Fence: 1}
	for name, endpoint := range map[string]string{"refused": refused, "hung": blackHole(t)} {
		l := newLock(t, client(t, endpoint), etcdlock.Options{Timeout: 300 * time.Millisecond})
		_, err := l.Acquire(context.Background(), "k", time.Minute)
		require.ErrorIs(t, err, locklab.ErrUnavailable, name)
		assert.NotErrorIs(t, err, locklab.ErrNotAcquired, name)
		require.ErrorIs(t, l.Release(context.Background(), lease), locklab.ErrUnavailable, name)
		_, err = l.Extend(context.Background(), lease, time.Minute)
		require.ErrorIs(t, err, locklab.ErrUnavailable, name)
	}
}

// TestSurvivesLeaderKill: the lock is raft's: killing the leader elects
// another, and the holder still holds it, on every member.
func TestSurvivesLeaderKill(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := etcdtest.Start(t, etcdproc.Options{})
	cli := etcdtest.Client(t, c)
	a := newLock(t, cli, etcdlock.Options{})
	b := newLock(t, etcdtest.Client(t, c), etcdlock.Options{})
	k := key(t)

	held, err := a.Acquire(ctx, k, 10*time.Second)
	require.NoError(t, err)
	old, err := c.KillLeader(ctx)
	require.NoError(t, err)
	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	require.NotEqual(t, old.Name, leader.Name, "a new leader")

	// A refusal, once the cluster answers again.
	for {
		_, err = b.Acquire(ctx, k, time.Minute)
		if !errors.Is(err, locklab.ErrUnavailable) || ctx.Err() != nil {
			break
		}
	}
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the holder still holds")
	held, err = a.Extend(ctx, held, 10*time.Second)
	require.NoError(t, err, "and can extend")

	require.NoError(t, old.Restart(ctx))
	resp, err := old.Client().Get(ctx, held.Token, clientv3.WithSerializable())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the restarted member has the lock key")
	assert.Equal(t, held.Fence, resp.Kvs[0].CreateRevision)

	require.NoError(t, a.Release(ctx, held))
	next, err := b.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	assert.Greater(t, next.Fence, held.Fence)
	require.NoError(t, b.Release(ctx, next))
}
