package pglock_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	"github.com/locklab/locklab/strategies/pglock"
)

// TestClientCrash: a session lock goes away with its client's connection;
// the lock table's row stays until it expires.
func TestClientCrash(t *testing.T) {
	pool := sharedPool(t)
	forEach(t, sessionNames, func(t *testing.T, name string) {
		ctx := context.Background()
		cfg := locklab.Config{Store: pool}
		a := newLocker(t, name, cfg).(sessionLocker)
		b := newLocker(t, name, cfg)
		k := key(t)
		_, err := a.Acquire(ctx, k, time.Hour)
		require.NoError(t, err)
		_, err = b.Acquire(ctx, k, time.Hour)
		require.ErrorIs(t, err, locklab.ErrNotAcquired)
		require.NoError(t, a.Close()) // the client's process dies: its connections close
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		began := time.Now()
		lease, err := locklab.Wait(wctx, b, k, time.Hour, locklab.RetryPolicy{Initial: time.Millisecond, Max: 20 * time.Millisecond})
		require.NoError(t, err, "the crashed client's lock must go with its connection")
		t.Logf("%s: free %v after the crash", name, time.Since(began).Round(time.Millisecond))
		require.NoError(t, b.Release(ctx, lease))
	})
	t.Run("pg-lock-table", func(t *testing.T) {
		ctx := context.Background()
		clk := newClock()
		cfg := locklab.Config{Store: pool, Clock: clk}
		k := key(t)
		_, err := newLocker(t, "pg-lock-table", cfg).Acquire(ctx, k, time.Minute)
		require.NoError(t, err) // and its client is never heard of again
		b := newLocker(t, "pg-lock-table", cfg)
		clk.Advance(59 * time.Second)
		_, err = b.Acquire(ctx, k, time.Minute)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "the row stays until it expires")
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pglock.LockTableName+" WHERE key = $1", k).Scan(&n))
		assert.Equal(t, 1, n, "the crashed holder's row is there")
		clk.Advance(2 * time.Second)
		lease, err := b.Acquire(ctx, k, time.Minute)
		require.NoError(t, err, "an expired row is recovered")
		require.NoError(t, b.Release(ctx, lease))
	})
}

// TestReleaseOfLostLease: a session the server ended took its lock with
// it; the holder's release says so and leaves the successor's lock alone.
// The lock table's blind DELETE instead removes the successor's row.
func TestReleaseOfLostLease(t *testing.T) {
	pool := sharedPool(t)
	forEach(t, sessionNames, func(t *testing.T, name string) {
		ctx := context.Background()
		cfg := locklab.Config{Store: pool}
		a := newLocker(t, name, cfg).(sessionLocker)
		b, c := newLocker(t, name, cfg), newLocker(t, name, cfg)
		k := key(t)
		stale, err := a.Acquire(ctx, k, time.Hour)
		require.NoError(t, err)
		pid, ok := a.Backend(stale)
		require.True(t, ok)
		require.NoError(t, shared.s.KillBackend(ctx, int(pid)))
		bl, err := b.Acquire(ctx, k, time.Hour)
		require.NoError(t, err, "the lock went with the ended session")

		require.ErrorIs(t, a.Release(ctx, stale), locklab.ErrNotHeld)
		_, err = c.Acquire(ctx, k, time.Hour)
		require.ErrorIs(t, err, locklab.ErrNotAcquired, "the successor's lock survives the stale release")
		require.ErrorIs(t, c.Release(ctx, bl), locklab.ErrNotHeld, "a lease is released by the Locker that holds it")
		_, ok = a.Backend(stale)
		assert.False(t, ok)
		require.NoError(t, b.Release(ctx, bl))
		require.ErrorIs(t, a.Release(ctx, locklab.Lease{}), locklab.ErrInvalid, "zero lease")
	})
	t.Run("pg-lock-table", func(t *testing.T) {
		ctx := context.Background()
		clk := newClock()
		cfg := locklab.Config{Store: pool, Clock: clk}
		a, b, c := newLocker(t, "pg-lock-table", cfg), newLocker(t, "pg-lock-table", cfg), newLocker(t, "pg-lock-table", cfg)
		k := key(t)
		stale, err := a.Acquire(ctx, k, time.Second)
		require.NoError(t, err)
		clk.Advance(2 * time.Second)
		_, err = b.Acquire(ctx, k, time.Minute)
		require.NoError(t, err, "b recovers the expired row")
		require.NoError(t, a.Release(ctx, stale), "expected weakness: the blind DELETE reports success")
		cl, err := c.Acquire(ctx, k, time.Minute)
		require.NoError(t, err, "expected weakness: a's stale release deleted b's row, so c holds the lock beside b")
		require.NoError(t, c.Release(ctx, cl))
		require.ErrorIs(t, c.Release(ctx, cl), locklab.ErrNotHeld, "no row: not held")
	})
}

// TestPausedServer: with the server frozen, an acquire ends with its
// context, as ErrUnavailable; a session lock whose acquire gave up does
// not stay taken once the server runs again.
func TestPausedServer(t *testing.T) {
	s := pgtest.Start(t, pgproc.Options{})
	pool := pgtest.Pool(t, s, poolParams)
	forEach(t, names, func(t *testing.T, name string) {
		cfg := locklab.Config{Store: pool}
		l, other := newLocker(t, name, cfg), newLocker(t, name, cfg)
		k := key(t)
		warm, err := l.Acquire(context.Background(), k+":warm", time.Minute) // the table and a connection exist
		require.NoError(t, err)
		require.NoError(t, l.Release(context.Background(), warm))

		require.NoError(t, s.Stop())
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		began := time.Now()
		_, err = l.Acquire(ctx, k, time.Minute)
		cancel()
		took := time.Since(began)
		require.NoError(t, s.Cont())
		require.ErrorIs(t, err, locklab.ErrUnavailable)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, took, 5*time.Second, "the acquire must end with its context")
		if name == "pg-lock-table" {
			return // the INSERT may have run once the server woke: the row then stays until it expires
		}
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer wcancel()
		lease, err := locklab.Wait(wctx, other, k, time.Minute, locklab.RetryPolicy{Initial: time.Millisecond, Max: 20 * time.Millisecond})
		require.NoError(t, err, "the abandoned attempt's session ends, and any lock it took")
		require.NoError(t, other.Release(context.Background(), lease))
	})
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	pool, err := pgxpool.New(context.Background(), "postgres://locklab@"+addr+"/postgres?sslmode=disable")
	require.NoError(t, err)
	defer pool.Close()
	forEach(t, names, func(t *testing.T, name string) {
		l := newLocker(t, name, locklab.Config{Store: pool})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := l.Acquire(ctx, key(t), time.Second)
		require.ErrorIs(t, err, locklab.ErrUnavailable)
		assert.NotErrorIs(t, err, locklab.ErrNotAcquired)
		require.NoError(t, ctx.Err(), "an unreachable server must fail fast, not hang")
	})
}

// TestFailover: locks held on a primary that dies, and a standby that had
// replayed everything promoted in its place. The session locks are
// forgotten there; the lock table's row, being data, is not.
func TestFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := pgtest.Start(t, pgproc.Options{})
	ppool := pgtest.Pool(t, primary, poolParams)
	standby := pgtest.StartStandby(t, primary, pgproc.Options{})

	held := map[string]locklab.Lease{}
	holders := map[string]locklab.Locker{}
	for _, n := range names {
		holders[n] = newLocker(t, n, locklab.Config{Store: ppool})
		lease, err := holders[n].Acquire(ctx, "orders:42", time.Hour)
		require.NoError(t, err, n)
		held[n] = lease
	}
	require.NoError(t, standby.WaitReplayed(ctx, primary))
	primary.KillPostmaster()
	require.NoError(t, standby.Promote(ctx))

	spool := pgtest.Pool(t, standby, poolParams)
	for _, n := range names {
		l := newLocker(t, n, locklab.Config{Store: spool})
		lease, err := l.Acquire(ctx, "orders:42", time.Hour)
		if n == "pg-lock-table" {
			require.ErrorIs(t, err, locklab.ErrNotAcquired, "%s: the replicated row survives the failover", n)
			continue
		}
		require.NoError(t, err, "%s: the promoted standby has forgotten the primary's lock: two holders", n)
		require.ErrorIs(t, holders[n].Release(ctx, held[n]), locklab.ErrNotHeld, "%s: the old holder's session died with the primary", n)
		require.NoError(t, l.Release(ctx, lease))
	}
}
