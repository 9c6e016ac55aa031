// The Notifier through an adapter's own pub/sub.

package adaptertest

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

// notifySlow is a policy whose only fallback is far away: a waiter that
// returns soon was woken by a notification or handed the lock.
var notifySlow = locklab.RetryPolicy{Initial: 10 * time.Second, Max: 10 * time.Second}

// Notifier checks a Notifier on the adapter's Source, which subscribes
// through the client's own pub/sub: a release wakes a waiter, a release
// with a waiter queued hands the lock over in one command, and the
// subscription comes back after the server kills it.
func Notifier(t *testing.T, newSource NewSource) {
	s := redistest.StartOne(t)
	src := newSource(t, s.Addr)
	require.Implements(t, (*locklab.Subscriber)(nil), src)
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: src, Notify: true})
	require.NoError(t, err)
	n := locklab.NewNotifier(src)
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A release wakes the waiter long before its 10s fallback.
	wakes := func(key string) {
		t.Helper()
		held, err := l.Acquire(ctx, key, time.Minute)
		require.NoError(t, err)
		time.AfterFunc(100*time.Millisecond, func() { l.Release(ctx, held) })
		began := time.Now()
		lease, err := n.Wait(ctx, l, key, time.Minute, notifySlow)
		require.NoError(t, err)
		assert.Less(t, time.Since(began), 5*time.Second, "woken by the release, not the fallback")
		require.NoError(t, l.Release(ctx, lease))
	}
	wakes("notify:wake")

	// With a waiter queued, the release is the handoff: one command (the
	// script's own calls aside). The first handoff loads the script.
	handoff := func(key string) map[string]int {
		t.Helper()
		held, err := l.Acquire(ctx, key, time.Minute)
		require.NoError(t, err)
		got := make(chan locklab.Lease, 1)
		go func() {
			lease, err := n.Wait(ctx, l, key, time.Minute, notifySlow)
			assert.NoError(t, err)
			got <- lease
		}()
		time.Sleep(200 * time.Millisecond) // let it try once and queue
		s.Do(t, "CONFIG", "RESETSTAT")
		require.NoError(t, n.Release(ctx, l, held))
		lease := <-got
		calls := CommandCalls(t, s)
		assert.Equal(t, held.Fence+1, lease.Fence, "handed over: the next fence")
		require.NoError(t, n.Release(ctx, l, lease))
		return calls
	}
	handoff("notify:handoff")
	calls := handoff("notify:handoff")
	assert.Equal(t, 1, calls["evalsha"], "the handoff is one script: %v", calls)
	for name := range calls {
		// The script's own calls are counted too.
		assert.Contains(t, []string{"evalsha", "config|resetstat", "ping", "get", "type", "set", "incr"}, name,
			"nothing else was sent: %v", calls)
	}

	// The server kills the subscription: it comes back, and wakes again.
	first := subscriber(t, s)
	require.NotEmpty(t, first)
	s.Do(t, "CLIENT", "KILL", "TYPE", "pubsub")
	require.Eventually(t, func() bool { id := subscriber(t, s); return id != "" && id != first },
		10*time.Second, 10*time.Millisecond, "the Notifier subscribes again")
	wakes("notify:again")
}

var statRE = regexp.MustCompile(`cmdstat_([a-z|]+):calls=(\d+)`)

// CommandCalls reads how many times the server ran each command since the
// last CONFIG RESETSTAT (the INFO that reads it aside).
func CommandCalls(t *testing.T, s *redistest.Server) map[string]int {
	t.Helper()
	info, err := redis.String(s.Do(t, "INFO", "commandstats"), nil)
	require.NoError(t, err)
	calls := map[string]int{}
	for _, m := range statRE.FindAllStringSubmatch(info, -1) {
		n, _ := strconv.Atoi(m[2])
		calls[m[1]] = n
	}
	return calls
}

var psubRE = regexp.MustCompile(`(?m)^id=(\d+) .*psub=1 `)

// subscriber is the id of the client of s with one pattern subscription,
// or "".
func subscriber(t *testing.T, s *redistest.Server) string {
	list, err := redis.String(s.Do(t, "CLIENT", "LIST", "TYPE", "pubsub"), nil)
	require.NoError(t, err)
	if m := psubRE.FindStringSubmatch(list); m != nil {
		return m[1]
	}
	return ""
}
