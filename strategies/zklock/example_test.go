package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
	_ "github.com/locklab/locklab/strategies/zklock" // registers zk-recipe, zk-ephemeral, zk-golib
)

// Take ZooKeeper's lock recipe by name, check it, release it. ensemble are
// your ZooKeeper servers ("10.0.0.1:2181", ...); here, those of an
// ensemble the test run starts.
func Example() {
	// The connection is yours: servers, session timeout, credentials
	// (AddAuth) and logger. The lock lives as long as its session, which
	// the connection's heartbeats keep alive; the servers end it, and
	// delete the lock, once they have heard nothing for the timeout.
	conn, _, err := zk.Connect(ensemble, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		panic(err)
	}
	defer conn.Close() // runs last: the lock never closes the connection

	lock, err := strategies.New("zk-recipe", locklab.Config{Store: conn})
	if err != nil {
		panic(err) // without the import above: strategy "zk-recipe" is in package ...
	}
	defer locklab.Close(lock) // nothing to stop: it opens nothing of its own

	ctx := context.Background()
	// The ttl reaches no server: it sets Lease.Until, the holder's own
	// deadline.
	lease, err := lock.Acquire(ctx, "orders:42", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", lease.Key)

	_, err = lock.Acquire(ctx, "orders:42", 30*time.Second)
	fmt.Println("second attempt refused:", errors.Is(err, locklab.ErrNotAcquired))

	// Extend checks that the lock's node is still this session's: after
	// the session's expiry it says ErrNotHeld.
	lease, err = locklab.Extend(ctx, lock, lease, time.Minute)
	if err != nil {
		panic(err)
	}
	fmt.Println("still held")

	if err := lock.Release(ctx, lease); err != nil {
		panic(err)
	}
	err = lock.Release(ctx, lease)
	fmt.Println("second release:", errors.Is(err, locklab.ErrNotHeld))

	// The fence is the lock node's czxid: it grows with every holder, so
	// a resource that refuses smaller fences refuses a holder whose
	// session expired without its knowing.
	next, err := lock.Acquire(ctx, "orders:42", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("the next holder's fence is larger:", next.Fence > lease.Fence)
	if err := lock.Release(ctx, next); err != nil {
		panic(err)
	}
	// Output:
	// holding orders:42
	// second attempt refused: true
	// still held
	// second release: true
	// the next holder's fence is larger: true
}
