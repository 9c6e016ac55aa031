package locklab_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// A lock on one Redis server, from the pool to Close. addr is your
// server's "host:port"; here, a redis-server the test run starts.
func ExampleNewPool() {
	// The pool is yours; NewPoolOptions and ParseURL take ACL users,
	// TLS, a database and timeouts.
	pool := locklab.NewPool(addr)
	defer pool.Close() // runs last: no lock closes its pool

	lock, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	if err != nil {
		panic(err)
	}
	defer locklab.Close(lock) // stops what the lock runs (Config.Watchdog's watchdogs)

	ctx := context.Background()
	lease, err := lock.Acquire(ctx, "orders:7", 30*time.Second)
	if err != nil {
		panic(err) // locklab.ErrNotAcquired: someone else holds it
	}
	// A resource that refuses writes with a smaller fence than it has
	// seen refuses a holder that lost its lease without knowing.
	fmt.Println("holding", lease.Key, "with fence", lease.Fence)

	called := time.Now()
	lease, err = locklab.Extend(ctx, lock, lease, time.Minute)
	if err != nil {
		panic(err) // locklab.ErrNotHeld: the lock was lost meanwhile
	}
	fmt.Println("extended for", lease.Until.Sub(called).Round(time.Second))

	if err := lock.Release(ctx, lease); err != nil {
		panic(err)
	}
	err = lock.Release(ctx, lease)
	fmt.Println("second release:", errors.Is(err, locklab.ErrNotHeld))
	// Output:
	// holding orders:7 with fence 1
	// extended for 1m0s
	// second release: true
}
