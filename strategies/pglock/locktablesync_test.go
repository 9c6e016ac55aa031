package pglock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/pglock"
)

// TestLockTableSyncRefusesAsynchronousServer: on a server that names no
// synchronous standby, pg-lock-table-sync refuses before it writes
// anything, saying what to set; the key stays free.
func TestLockTableSyncRefusesAsynchronousServer(t *testing.T) {
	pool := sharedPool(t)
	ctx := context.Background()
	l := newLocker(t, pglock.LockTableSyncName, locklab.Config{Store: pool})
	k := key(t)
	_, err := l.Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.NotErrorIs(t, err, locklab.ErrNotAcquired)
	assert.ErrorContains(t, err, `synchronous_standby_names ""`)
	_, err = l.Acquire(ctx, k, time.Minute)
	require.ErrorIs(t, err, locklab.ErrInvalid, "asked again, refused again")
	free := newLocker(t, "pg-lock-table", locklab.Config{Store: pool})
	lease, err := free.Acquire(ctx, k, time.Minute)
	require.NoError(t, err, "the refusal wrote no row")
	require.NoError(t, free.Release(ctx, lease))
}

// TestLockTableSyncFailover: on a primary whose commits wait for a
// synchronous standby, the row pg-lock-table-sync acquired is on the
// standby once Acquire returns: the primary dies at once, the standby is
// promoted without waiting for any replay, and the key is still taken
// there. A session whose synchronous_commit is local is refused, as the
// server's default of every session would be.
func TestLockTableSyncFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := pgtest.Start(t, pgproc.Options{})
	standby := pgtest.StartStandby(t, primary, pgproc.Options{})
	require.NoError(t, primary.SetSynchronous(ctx, "*", "local"))
	require.NoError(t, primary.WaitSynchronous(ctx))

	local := newLocker(t, pglock.LockTableSyncName, locklab.Config{Store: pgtest.Pool(t, primary, poolParams)})
	_, err := local.Acquire(ctx, "orders:42", time.Hour)
	require.ErrorIs(t, err, locklab.ErrInvalid, "synchronous_commit local waits for no standby")
	assert.ErrorContains(t, err, "synchronous_commit local")

	pool := pgtest.Pool(t, primary, poolParams, "synchronous_commit=on") // a runtime parameter of the session
	holder := newLocker(t, pglock.LockTableSyncName, locklab.Config{Store: pool})
	lease, err := holder.Acquire(ctx, "orders:42", time.Hour)
	require.NoError(t, err)
	primary.KillPostmaster()
	require.NoError(t, standby.Promote(ctx))

	spool := pgtest.Pool(t, standby, poolParams)
	_, err = newLocker(t, "pg-lock-table", locklab.Config{Store: spool}).Acquire(ctx, "orders:42", time.Hour)
	require.ErrorIs(t, err, locklab.ErrNotAcquired, "the row the primary acknowledged is on the promoted standby")
	_, err = newLocker(t, pglock.LockTableSyncName, locklab.Config{Store: spool}).Acquire(ctx, "orders:42", time.Hour)
	require.ErrorIs(t, err, locklab.ErrInvalid, "the promoted standby has no synchronous standby of its own")
	assert.Equal(t, "orders:42", lease.Key)
}

// TestLockTableSyncRegistered: the description names where the setting
// comes from, and the strategy is the lock table's statement for
// statement (its summary says so).
func TestLockTableSyncRegistered(t *testing.T) {
	d, err := strategies.Info(pglock.LockTableSyncName)
	require.NoError(t, err)
	assert.Contains(t, d.Source, "Synchronous Replication")
	assert.Contains(t, d.Summary, "synchronous_standby_names")
	assert.NotEmpty(t, d.BrokenByDesign)
}
