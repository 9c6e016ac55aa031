package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
	_ "github.com/locklab/locklab/strategies/etcdlock" // registers etcd-lease
)

// Take etcd's lock by name, extend it, release it, close it. endpoints are
// the members of your etcd cluster ("http://10.0.0.1:2379", ...); here,
// those of a cluster the test run starts.
func Example() {
	// The client is yours: endpoints, TLS, credentials, and its logger,
	// which is quiet here (see the package documentation's "log lines").
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		panic(err)
	}
	defer cli.Close() // runs last: the lock never closes the client

	lock, err := strategies.New("etcd-lease", locklab.Config{Store: cli})
	if err != nil {
		panic(err) // without the import above: strategy "etcd-lease" is in package ...
	}
	defer locklab.Close(lock) // stops what the lock runs (Config.Watchdog's keepalives)

	ctx := context.Background()
	lease, err := lock.Acquire(ctx, "orders:42", 5*time.Second) // etcd leases have whole seconds
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", lease.Key)

	_, err = lock.Acquire(ctx, "orders:42", 5*time.Second)
	fmt.Println("second client refused:", errors.Is(err, locklab.ErrNotAcquired))

	// etcd renews a lease to the TTL it was granted with: asking for 10s
	// gives 5s, and the returned Until says so.
	called := time.Now()
	lease, err = locklab.Extend(ctx, lock, lease, 10*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("extended for", lease.Until.Sub(called).Round(time.Second))

	if err := lock.Release(ctx, lease); err != nil {
		panic(err)
	}
	err = lock.Release(ctx, lease)
	fmt.Println("second release:", errors.Is(err, locklab.ErrNotHeld))

	// The fence is the lock key's create revision: it grows with every
	// holder, so a resource that refuses smaller fences refuses a holder
	// that lost its lease without knowing.
	next, err := lock.Acquire(ctx, "orders:42", 5*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("the next holder's fence is larger:", next.Fence > lease.Fence)
	if err := lock.Release(ctx, next); err != nil {
		panic(err)
	}
	// Output:
	// holding orders:42
	// second client refused: true
	// extended for 5s
	// second release: true
	// the next holder's fence is larger: true
}
