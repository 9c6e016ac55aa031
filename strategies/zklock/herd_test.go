package zklock_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies/zklock"
)

// blocking is a lock with a waiting acquire.
type blocking interface {
	locklab.Locker
	Lock(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error)
}

// TestHerd counts, on each waiter's wire, what one release costs: the
// watch notifications the waiters receive and the requests they send from
// the release until the next holder has the lock and the waiters are
// quiet again. zk-ephemeral's waiters all watch the one node: the release
// wakes every one of them, and each sends a create and, losing, a new
// exists (the winner an exists for its fence). zk-recipe's waiters each
// watch their predecessor: the release wakes one, which reads the queue
// and its node's czxid. go-zookeeper's zk.Lock watches its predecessor too,
// and reads the queue.
func TestHerd(t *testing.T) {
	t.Parallel()
	const n = 5
	addrs := servers(t)
	builds := map[string]func(*zk.Conn) blocking{
		zklock.EphemeralName: func(c *zk.Conn) blocking { return newEphemeral(t, c) },
		zklock.RecipeName:    func(c *zk.Conn) blocking { return newRecipe(t, c, zklock.Options{}) },
		zklock.GolibName:     func(c *zk.Conn) blocking { return newGolib(t, c, 0) },
	}
	for name, build := range builds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			k := key(t)
			holderConn, _ := dial(t, addrs)
			holder := build(holderConn)
			held, err := holder.Acquire(ctx, k, time.Minute)
			require.NoError(t, err)

			wires := make([]*wire, n)
			got := make(chan int, n)
			done := make(chan struct{})
			finished := make(chan error, n)
			for i := range n {
				conn, w := dial(t, addrs)
				wires[i] = w
				l := build(conn)
				go func() {
					lease, err := l.Lock(ctx, k, time.Minute)
					if err != nil {
						finished <- err
						return
					}
					got <- i
					<-done
					finished <- l.Release(ctx, lease)
				}()
			}
			// A waiter waits once it has set its watch: exists() on the
			// lock's node, or getData() on its predecessor.
			watch := int32(opGetData)
			if name == zklock.EphemeralName {
				watch = opExists
			}
			waitFor(t, "every waiter to watch", func() bool {
				for _, w := range wires {
					if reqs, _ := w.counts(); reqs[watch] == 0 {
						return false
					}
				}
				return true
			})
			before := settled(wires)

			require.NoError(t, holder.Release(ctx, held))
			winner := <-got
			// The requests the release costs at the least, before the
			// wires must be quiet: on a loaded machine a woken waiter's
			// request may come after a quiet moment.
			least := map[string]int{zklock.EphemeralName: 2 * n, zklock.RecipeName: 2, zklock.GolibName: 1}[name]
			waitFor(t, "the woken waiters' requests", func() bool {
				sent := 0
				for i, w := range wires {
					reqs, _ := w.counts()
					for op, c := range reqs {
						sent += c - before[i].reqs[op]
					}
				}
				return sent >= least
			})
			after := settled(wires)
			woken, requests := 0, map[int32]int{}
			for i := range n {
				reqs, events := after[i].reqs, after[i].events-before[i].events
				if events > 0 {
					woken++
				}
				for op, c := range reqs {
					requests[op] += c - before[i].reqs[op]
				}
			}
			total := 0
			for _, c := range requests {
				total += c
			}
			t.Logf("%s, %d waiters: one release woke %d, which sent %d requests (by opcode %v); waiter %d holds the lock",
				name, n, woken, total, nonZero(requests), winner)
			switch name {
			case zklock.EphemeralName:
				assert.Equal(t, n, woken, "the herd: every waiter wakes")
				assert.Equal(t, n, requests[opCreate], "each sends a create")
				assert.Equal(t, n, requests[opExists], "n-1 watch again, the winner reads its fence")
			case zklock.RecipeName:
				assert.Equal(t, 1, woken, "one waiter wakes")
				assert.Equal(t, map[int32]int{opGetChildren2: 1, opExists: 1}, nonZero(requests))
			case zklock.GolibName:
				assert.Equal(t, 1, woken, "one waiter wakes")
				assert.Equal(t, map[int32]int{opGetChildren2: 1}, nonZero(requests))
			}
			select {
			case i := <-got:
				t.Fatalf("waiter %d holds the lock beside waiter %d", i, winner)
			default:
			}
			close(done)
			for range n {
				require.NoError(t, <-finished)
			}
		})
	}
}

// tally is a wire's counts at one moment.
type tally struct {
	reqs   map[int32]int
	events int
}

// settled waits until the wires' counts stay the same for 300ms, and returns
// them.
func settled(wires []*wire) []tally {
	snap := func() []tally {
		out := make([]tally, len(wires))
		for i, w := range wires {
			out[i].reqs, out[i].events = w.counts()
		}
		return out
	}
	last := snap()
	for {
		time.Sleep(300 * time.Millisecond)
		now := snap()
		same := true
		for i := range now {
			same = same && now[i].events == last[i].events && maps.Equal(now[i].reqs, last[i].reqs)
		}
		if same {
			return now
		}
		last = now
	}
}

// nonZero drops the opcodes counted zero times.
func nonZero(m map[int32]int) map[int32]int {
	out := map[int32]int{}
	for op, c := range m {
		if c != 0 {
			out[op] = c
		}
	}
	return out
}
