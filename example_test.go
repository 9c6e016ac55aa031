package locklab_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/strategies"
)

// The servers the examples talk to, started for the test run: addr is a
// redis-server process; sentinels are the Sentinels that watch it as the
// master "locks"; clusterSeeds are the nodes of a Redis Cluster.
var (
	addr         string
	sentinels    []string
	clusterSeeds []string
)

func TestMain(m *testing.M) {
	srv, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	addr = srv.Addr
	sentinel, err := redisproc.Start(redisproc.Options{Sentinel: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		srv.Stop()
		os.Exit(1)
	}
	sentinels = []string{sentinel.Addr}
	if err := monitor(sentinel.Addr, "locks", srv.Addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		sentinel.Stop()
		srv.Stop()
		os.Exit(1)
	}
	cluster, err := redisproc.StartCluster(redisproc.ClusterOptions{Masters: 1, Replicas: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		sentinel.Stop()
		srv.Stop()
		os.Exit(1)
	}
	clusterSeeds = cluster.Addrs()
	code := m.Run()
	cluster.Close()
	sentinel.Stop()
	srv.Stop()
	os.Exit(code)
}

// monitor makes the Sentinel at sentinel watch the master at master under
// name, with a quorum of one.
func monitor(sentinel, name, master string) error {
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		return err
	}
	c, err := redis.Dial("tcp", sentinel)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Do("SENTINEL", "MONITOR", name, host, port, 1)
	return err
}

// Pick a strategy by name, take the lock, release it.
func Example() {
	pool := locklab.NewPool(addr)
	defer pool.Close()

	lock, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lease, err := lock.Acquire(ctx, "orders:42", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", lease.Key, "with fence", lease.Fence)

	// A second client is refused while the lock is held.
	_, err = lock.Acquire(ctx, "orders:42", 30*time.Second)
	fmt.Println("second client refused:", errors.Is(err, locklab.ErrNotAcquired))

	if err := lock.Release(ctx, lease); err != nil {
		panic(err)
	}
	// Releasing twice is detected: the lock is no longer held.
	err = lock.Release(ctx, lease)
	fmt.Println("second release:", errors.Is(err, locklab.ErrNotHeld))
	// Output:
	// holding orders:42 with fence 1
	// second client refused: true
	// second release: true
}

// Wait blocks until the lock is free, retrying with backoff, or until the
// context ends.
func ExampleWait() {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	lock, _ := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	ctx := context.Background()

	first, _ := lock.Acquire(ctx, "report", 100*time.Millisecond)
	_ = first // the holder never releases: its TTL frees the lock

	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lease, err := locklab.Wait(ctx, lock, "report", time.Second, locklab.RetryPolicy{Initial: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	fmt.Println("acquired after the first holder's TTL, fence", lease.Fence)
	lock.Release(ctx, lease)

	// With the lock held and a short deadline, Wait gives up; the error
	// says both why it stopped and why the last attempt failed.
	held, _ := lock.Acquire(context.Background(), "report", time.Minute)
	short, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	_, err = locklab.Wait(short, lock, "report", time.Second, locklab.RetryPolicy{})
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, locklab.ErrNotAcquired))
	lock.Release(context.Background(), held)
	// Output:
	// acquired after the first holder's TTL, fence 2
	// true true
}

// Fence numbers let the protected resource refuse a holder whose lease has
// lapsed without its knowing: it accepts only writes whose fence is at least
// the largest it has seen.
func ExampleLease_fencing() {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	lock, _ := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	ctx := context.Background()

	var highest int64 // kept by the resource
	write := func(who string, lease locklab.Lease) {
		if lease.Fence < highest {
			fmt.Printf("%s: write refused (fence %d < %d)\n", who, lease.Fence, highest)
			return
		}
		highest = lease.Fence
		fmt.Printf("%s: write accepted (fence %d)\n", who, lease.Fence)
	}

	a, _ := lock.Acquire(ctx, "fenced", 50*time.Millisecond)
	time.Sleep(80 * time.Millisecond) // A pauses past its TTL
	b, _ := lock.Acquire(ctx, "fenced", time.Minute)
	write("B", b)
	write("A", a) // A wakes up and writes with its stale lease
	lock.Release(ctx, b)
	// Output:
	// B: write accepted (fence 2)
	// A: write refused (fence 1 < 2)
}

// Extend pushes a held lease's expiry forward, and reports a lost lock
// instead of re-creating it. A lock with no safe extend refuses.
func ExampleExtend() {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	lock, _ := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	ctx := context.Background()

	lease, _ := lock.Acquire(ctx, "job", time.Second)
	lease, err := locklab.Extend(ctx, lock, lease, time.Minute)
	fmt.Println("extended:", err == nil)
	lock.Release(ctx, lease)

	lost, _ := lock.Acquire(ctx, "job", 30*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	_, err = locklab.Extend(ctx, lock, lost, time.Minute)
	fmt.Println("lost:", errors.Is(err, locklab.ErrNotHeld))

	blind, _ := strategies.New("set-nx-px-del", locklab.Config{Pool: pool})
	other, _ := blind.Acquire(ctx, "job", time.Second)
	_, err = locklab.Extend(ctx, blind, other, time.Minute)
	fmt.Println("set-nx-px-del:", errors.Is(err, locklab.ErrInvalid))
	blind.Release(ctx, other)
	// Output:
	// extended: true
	// lost: true
	// set-nx-px-del: true
}

// A watchdog extends a lease while the holder works, and tells the holder
// when the lock is lost.
func ExampleWatch() {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	lock, _ := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	ctx := context.Background()

	// Work that outlasts the TTL: 4 steps of 400ms on a 1s lease, which
	// the watchdog extends every 200ms.
	lease, _ := lock.Acquire(ctx, "batch", time.Second)
	w, err := locklab.Watch(ctx, lock, lease, time.Second, 200*time.Millisecond)
	if err != nil {
		panic(err)
	}
	for step := 0; step < 4; step++ {
		select {
		case <-w.Lost():
			fmt.Println("lost the lock:", w.Err())
			return
		case <-time.After(400 * time.Millisecond): // one step of work
		}
	}
	fmt.Println("work done, still holding:", w.Err() == nil)
	lock.Release(ctx, w.Stop())
	// Output:
	// work done, still holding: true
}

// Read the server, ACL user, database, TLS and timeouts from a URL.
func ExampleParseURL() {
	o, err := locklab.ParseURL("rediss://alice:s3cret@redis.internal:6380/2?dial_timeout=500ms")
	if err != nil {
		panic(err)
	}
	fmt.Println(o.Addr, o.Username, o.DB, o.DialTimeout, "TLS:", o.TLSConfig != nil)
	fmt.Println(o.Redacted())
	// o.TLSConfig.RootCAs = myCAs // to trust a private CA
	// pool, err := locklab.NewPoolOptions(o)
	// Output:
	// redis.internal:6380 alice 2 500ms TLS: true
	// rediss://alice:xxxxx@redis.internal:6380/2
}

// A pool with a database and timeouts of its own; zero fields keep the
// documented defaults.
func ExampleNewPoolOptions() {
	pool, err := locklab.NewPoolOptions(locklab.PoolOptions{Addr: addr, DB: 1, ReadTimeout: time.Second})
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	lock, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lease, err := lock.Acquire(ctx, "orders:43", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", lease.Key)
	fmt.Println("released:", lock.Release(ctx, lease) == nil)
	// Output:
	// holding orders:43
	// released: true
}

// Redis Sentinel: the pool asks the Sentinels which server is the master,
// and asks again after a failover. The lock is the same as on one server.
func ExampleNewSentinelPool() {
	pool, err := locklab.NewSentinelPool(locklab.SentinelOptions{
		MasterName: "locks",
		Sentinels:  sentinels, // "10.0.0.1:26379", ...
		// Master: locklab.PoolOptions{Username: ..., Password: ...}, // the master's ACL user, TLS, ...
	})
	if err != nil {
		panic(err)
	}
	defer pool.Close() // runs last: no lock closes its pool

	lock, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	if err != nil {
		panic(err)
	}
	defer locklab.Close(lock)

	ctx := context.Background()
	lease, err := lock.Acquire(ctx, "sentinel:orders:42", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", lease.Key, "on the master:", pool.MasterAddr() == addr)
	if err := lock.Release(ctx, lease); err != nil {
		panic(err)
	}
	// Output:
	// holding sentinel:orders:42 on the master: true
}

// Redis Cluster: each lock runs on the master of its key's hash slot. Every
// strategy but redlock runs on a cluster; redlock refuses one.
func ExampleNewClusterPool() {
	pool, err := locklab.NewClusterPool(locklab.ClusterOptions{
		Addrs: clusterSeeds, // some of the cluster's nodes: "10.0.0.1:6379", ...
	})
	if err != nil {
		panic(err)
	}
	defer pool.Close() // runs last: no lock closes its pool

	lock, err := strategies.New("set-nx-px", locklab.Config{Pool: pool})
	if err != nil {
		panic(err)
	}
	defer locklab.Close(lock)

	ctx := context.Background()
	lease, err := lock.Acquire(ctx, "orders:42", 30*time.Second)
	if err != nil {
		panic(err)
	}
	// The fence counter lives in the lock key's slot.
	fmt.Println("holding", lease.Key, "with fence", lease.Fence)
	if err := lock.Release(ctx, lease); err != nil {
		panic(err)
	}

	_, err = strategies.New("redlock", locklab.Config{Nodes: []locklab.ConnSource{pool}})
	fmt.Println("redlock refused:", errors.Is(err, locklab.ErrInvalid))
	// Output:
	// holding orders:42 with fence 1
	// redlock refused: true
}

// Handing a lock over: waiters of a Notifier queue in this process, and
// Notifier.Release passes the lock straight to the first of them in one
// atomic command, so the key never falls free for a newcomer to take. The
// strategy must publish its releases (Config.Notify) and be able to hand a
// lock over (a locklab.Handoffer: set-nx-px is).
func ExampleNotifier_Release() {
	pool := locklab.NewPool(addr)
	defer pool.Close()
	lock, err := strategies.New("set-nx-px", locklab.Config{Pool: pool, Notify: true})
	if err != nil {
		panic(err)
	}
	n := locklab.NewNotifier(pool) // one per process and server: it subscribes once
	defer n.Close()

	ctx := context.Background()
	held, err := lock.Acquire(ctx, "invoice:7", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("first holder, fence", held.Fence)

	handed := make(chan locklab.Lease)
	go func() {
		// Wait blocks until the lock is handed over, released or expired.
		lease, err := n.Wait(ctx, lock, "invoice:7", 30*time.Second, locklab.RetryPolicy{})
		if err != nil {
			panic(err)
		}
		handed <- lease
	}()
	time.Sleep(200 * time.Millisecond) // the waiter tries once, then queues

	// Release through the Notifier, not lock.Release: with a waiter
	// queued, the lock goes to it without falling free.
	if err := n.Release(ctx, lock, held); err != nil {
		panic(err)
	}
	_, err = lock.Acquire(ctx, "invoice:7", 30*time.Second)
	fmt.Println("a newcomer is refused:", errors.Is(err, locklab.ErrNotAcquired))
	next := <-handed
	fmt.Println("the waiter holds it, fence", next.Fence)
	fmt.Println("the old lease is gone:", errors.Is(lock.Release(ctx, held), locklab.ErrNotHeld))
	if err := n.Release(ctx, lock, next); err != nil { // no waiter: a plain release
		panic(err)
	}
	// Output:
	// first holder, fence 1
	// a newcomer is refused: true
	// the waiter holds it, fence 2
	// the old lease is gone: true
}
