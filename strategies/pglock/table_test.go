package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	"github.com/locklab/locklab/strategies/pglock"
)

// TestLockTableClockSkew: a client whose clock runs ahead finds a live row
// expired, deletes it and takes the lock beside its holder.
func TestLockTableClockSkew(t *testing.T) {
	pool := sharedPool(t)
	ctx := context.Background()
	clk, ahead := newClock(), newClock()
	ahead.Advance(2 * time.Minute)
	a := newLocker(t, "pg-lock-table", locklab.Config{Store: pool, Clock: clk})
	b := newLocker(t, "pg-lock-table", locklab.Config{Store: pool, Clock: ahead})
	k := key(t)
	la, err := a.Acquire(ctx, k, time.Minute)
	require.NoError(t, err)
	assert.True(t, la.Valid(clk.Now()), "a's lease is valid by a's clock")
	lb, err := b.Acquire(ctx, k, time.Minute)
	require.NoError(t, err, "expected weakness: b's clock says a's row expired")
	require.NoError(t, b.Release(ctx, lb))
}

// TestLockTableRecreated: a table dropped under a Locker is created again
// on the next attempt after the one that found it missing.
func TestLockTableRecreated(t *testing.T) {
	pool := sharedPool(t)
	ctx := context.Background()
	for _, c := range []struct{ name, table string }{{"pg-lock-table", pglock.LockTableName}, {"pg-for-update", pglock.RowTableName}} {
		t.Run(c.name, func(t *testing.T) {
			l := newLocker(t, c.name, locklab.Config{Store: pool})
			lease, err := l.Acquire(ctx, key(t), time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx, lease))
			_, err = pool.Exec(ctx, "DROP TABLE "+c.table)
			require.NoError(t, err)
			_, err = l.Acquire(ctx, key(t), time.Minute)
			require.ErrorIs(t, err, locklab.ErrUnavailable, "the table is gone")
			lease, err = l.Acquire(ctx, key(t), time.Minute)
			require.NoError(t, err, "and is created again")
			require.NoError(t, l.Release(ctx, lease))
		})
	}
}

// TestOwnTablesOnly: the strategies create no table outside their prefix.
func TestOwnTablesOnly(t *testing.T) {
	pool := sharedPool(t)
	ctx := context.Background()
	for _, n := range names {
		l := newLocker(t, n, locklab.Config{Store: pool})
		lease, err := l.Acquire(ctx, key(t)+n, time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx, lease))
	}
	rows, err := pool.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		tables = append(tables, s)
	}
	require.NoError(t, rows.Err())
	assert.ElementsMatch(t, []string{pglock.LockTableName, pglock.RowTableName}, tables)
	for _, tb := range tables {
		assert.True(t, strings.HasPrefix(tb, pglock.TablePrefix), tb)
	}
}

// TestFirstAcquiresCreateTheTableTogether: on a server where the strategy's
// table does not exist yet, many clients' first acquires create it at the
// same moment. The catalog collisions that brings (a duplicate type, table
// or object) are not failures: every acquire is taken or refused.
func TestFirstAcquiresCreateTheTableTogether(t *testing.T) {
	s := pgtest.Start(t, pgproc.Options{})
	pool := pgtest.Pool(t, s, poolParams)
	for _, name := range []string{"pg-lock-table", "pg-for-update"} {
		for round := range 5 {
			for _, table := range []string{pglock.LockTableName, pglock.RowTableName} {
				_, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
				require.NoError(t, err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 16 {
				l := newLocker(t, name, locklab.Config{Store: pool})
				wg.Go(func() {
					lease, err := l.Acquire(context.Background(), fmt.Sprintf("first:%d:%d", round, i), time.Minute)
					if err == nil {
						err = l.Release(context.Background(), lease)
					}
					if err != nil && !errors.Is(err, locklab.ErrNotAcquired) {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("%s, round %d: %v", name, round, err)
			}
		}
	}
}
