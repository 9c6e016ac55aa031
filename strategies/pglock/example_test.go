package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
	_ "github.com/locklab/locklab/strategies/pglock" // registers pg-advisory, pg-for-update, pg-lock-table
)

// Take PostgreSQL's advisory lock by name, release it, close it. dsn is
// your database's connection string ("postgres://app@db.internal/app");
// here, that of a server the test run starts.
func Example() {
	ctx := context.Background()
	// The pool is yours. Each lock held keeps one of its connections
	// until released: allow as many as locks held at once, plus one
	// (pool_max_conns in the connection string).
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close() // runs last: no lock closes the pool

	lock, err := strategies.New("pg-advisory", locklab.Config{Store: pool})
	if err != nil {
		panic(err) // without the import above: strategy "pg-advisory" is in package ...
	}
	defer locklab.Close(lock) // ends the sessions of locks still held, which frees them

	lease, err := lock.Acquire(ctx, "orders:42", 30*time.Second)
	if err != nil {
		panic(err)
	}
	// The lock lasts as long as its session; the ttl only sets
	// Lease.Until, the time by which the holder means to be done.
	fmt.Println("holding", lease.Key, "with fence", lease.Fence, "(none)")

	_, err = lock.Acquire(ctx, "orders:42", 30*time.Second)
	fmt.Println("second client refused:", errors.Is(err, locklab.ErrNotAcquired))

	// A session lock has no TTL to extend.
	_, err = locklab.Extend(ctx, lock, lease, time.Minute)
	fmt.Println("extend refused:", errors.Is(err, locklab.ErrInvalid))

	if err := lock.Release(ctx, lease); err != nil {
		panic(err)
	}
	err = lock.Release(ctx, lease)
	fmt.Println("second release:", errors.Is(err, locklab.ErrNotHeld))
	// Output:
	// holding orders:42 with fence 0 (none)
	// second client refused: true
	// extend refused: true
	// second release: true
}
