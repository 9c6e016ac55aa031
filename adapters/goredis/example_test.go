package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/goredis"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/strategies"
)

// addr is the Redis server the examples talk to: a redis-server process
// started for the test run.
var addr string

func TestMain(m *testing.M) {
	srv, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	addr = srv.Addr
	code := m.Run()
	srv.Stop()
	shared.Close()
	os.Exit(code)
}

// A go-redis program picks a strategy by name on the client it already has.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	lock, err := strategies.New("set-nx-px", locklab.Config{Pool: goredis.New(rdb)})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lease, err := lock.Acquire(ctx, "orders:42", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", lease.Key, "with fence", lease.Fence)

	_, err = lock.Acquire(ctx, "orders:42", 30*time.Second)
	fmt.Println("second client refused:", errors.Is(err, locklab.ErrNotAcquired))

	// The lock is an ordinary key, seen through the same client.
	ttl := rdb.PTTL(ctx, "orders:42").Val()
	fmt.Println("key expires within 30s:", ttl > 0 && ttl <= 30*time.Second)

	if err := lock.Release(ctx, lease); err != nil {
		panic(err)
	}
	// Output:
	// holding orders:42 with fence 1
	// second client refused: true
	// key expires within 30s: true
}

// Redlock takes one go-redis client per independent master.
func ExampleNew_redlock() {
	var nodes []locklab.ConnSource
	for range 3 {
		srv, err := redisproc.Start(redisproc.Options{})
		if err != nil {
			panic(err)
		}
		defer srv.Stop()
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer rdb.Close()
		nodes = append(nodes, goredis.New(rdb))
	}
	lock, err := strategies.New("redlock", locklab.Config{Nodes: nodes})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lease, err := locklab.Wait(ctx, lock, "report:daily", 10*time.Second, locklab.RetryPolicy{})
	if err != nil {
		panic(err)
	}
	fmt.Println("valid:", lease.Valid(time.Now()))
	fmt.Println("released:", lock.Release(ctx, lease) == nil)
	// Output:
	// valid: true
	// released: true
}

// A Notifier on the go-redis client subscribes through go-redis's own
// pub/sub: a waiter sleeps until the lock is released, and a release with
// a waiter queued hands the lock over in one command.
func ExampleNew_notifier() {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	src := goredis.New(rdb)
	lock, err := strategies.New("set-nx-px", locklab.Config{Pool: src, Notify: true})
	if err != nil {
		panic(err)
	}
	n := locklab.NewNotifier(src)
	defer n.Close()

	ctx := context.Background()
	held, err := lock.Acquire(ctx, "invoice:7", 30*time.Second)
	if err != nil {
		panic(err)
	}
	got := make(chan locklab.Lease)
	go func() {
		lease, err := n.Wait(ctx, lock, "invoice:7", 30*time.Second, locklab.RetryPolicy{})
		if err != nil {
			panic(err)
		}
		got <- lease
	}()
	time.Sleep(100 * time.Millisecond) // the waiter is refused and queues
	if err := n.Release(ctx, lock, held); err != nil {
		panic(err)
	}
	lease := <-got
	fmt.Println("the waiter holds the next fence:", lease.Fence == held.Fence+1)
	if err := n.Release(ctx, lock, lease); err != nil {
		panic(err)
	}
	// Output:
	// the waiter holds the next fence: true
}
