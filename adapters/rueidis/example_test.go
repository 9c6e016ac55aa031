package rueidis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/locklab/locklab"
	locklabrueidis "github.com/locklab/locklab/adapters/rueidis"
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

// A rueidis program picks a strategy by name on the client it already has.
func ExampleNew() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	lock, err := strategies.New("set-nx-px", locklab.Config{Pool: locklabrueidis.New(client)})
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
	ttl, _ := client.Do(ctx, client.B().Pttl().Key("orders:42").Build()).AsInt64()
	fmt.Println("key expires within 30s:", ttl > 0 && ttl <= 30000)

	if err := lock.Release(ctx, lease); err != nil {
		panic(err)
	}
	// Output:
	// holding orders:42 with fence 1
	// second client refused: true
	// key expires within 30s: true
}

// Redlock takes one rueidis client per independent master.
func ExampleNew_redlock() {
	var nodes []locklab.ConnSource
	for range 3 {
		srv, err := redisproc.Start(redisproc.Options{})
		if err != nil {
			panic(err)
		}
		defer srv.Stop()
		client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}})
		if err != nil {
			panic(err)
		}
		defer client.Close()
		nodes = append(nodes, locklabrueidis.New(client))
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

// A Notifier on the rueidis client subscribes through rueidis's own
// pub/sub: a waiter sleeps until the lock is released, and a release with
// a waiter queued hands the lock over in one command.
func ExampleNew_notifier() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	src := locklabrueidis.New(client)
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
