// Package adaptertest is the test suite every client adapter (adapters/*)
// passes against real redis-server processes: replies come back as redigo
// gives them, scripts fall back from EVALSHA to EVAL on NOSCRIPT, MULTI/EXEC
// stays on one connection, errors are told apart as the strategies need, and
// every registered strategy passes the strategytest conformance suite
// through the adapter.
package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/adapt"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/strategytest"
)

// NewSource returns a ConnSource of the adapter over a new client of its
// library connected to the redis-server at addr ("host:port"). It closes the
// client when tb ends.
type NewSource func(tb testing.TB, addr string) locklab.ConnSource

// Run runs the whole suite.
func Run(t *testing.T, newSource NewSource) {
	t.Run("Replies", func(t *testing.T) { Replies(t, newSource) })
	t.Run("ScriptFallback", func(t *testing.T) { ScriptFallback(t, newSource) })
	t.Run("Transaction", func(t *testing.T) { Transaction(t, newSource) })
	t.Run("Errors", func(t *testing.T) { Errors(t, newSource) })
	t.Run("Conformance", func(t *testing.T) { Conformance(t, newSource) })
}

// Replies sends the same commands through a redigo pool to one server and
// through the adapter to another, and wants the same replies, types
// included.
func Replies(t *testing.T, newSource NewSource) {
	servers := redistest.Start(t, 2)
	ref, src := servers[0].Pool, newSource(t, servers[1].Addr)
	ctx := context.Background()
	cmds := [][]any{
		{"SET", "r:k", "v1"},
		{"SET", "r:k", "v2", "NX", "PX", 60000},
		{"SET", "r:k", "v3", "GET"},
		{"SET", "r:k", "v4", "get"},
		{"GET", "r:k"},
		{"GET", "r:missing"},
		{"PING"},
		{"PING", "hello"},
		{"INCR", "r:n"},
		{"INCRBY", "r:n", int64(41)},
		{"PEXPIRE", "r:n", 60000},
		{"PTTL", "r:missing"},
		{"EXISTS", "r:k", "r:n", "r:missing"},
		{"HSET", "r:h", "f1", "a", "f2", 2},
		{"HGETALL", "r:h"},
		{"TYPE", "r:h"},
		{"MGET", "r:k", "r:missing", "r:n"},
		{"EVAL", "return {1, 'two', false, {3}, redis.call('get', KEYS[1])}", 1, "r:k"},
		{"EVAL", "return redis.status_reply('FINE')", 0},
		{"EVAL", "return 3.7", 0},
		{"SET", "r:b", true},
		{"GET", "r:b"},
		{"SET", "r:f", 1.5},
		{"GET", "r:f"},
		{"DEL", "r:k", "r:n", "r:h", "r:b", "r:f"},
	}
	for _, cmd := range cmds {
		want, wantErr := doOn(t, ctx, ref, cmd)
		got, gotErr := doOn(t, ctx, src, cmd)
		if cmd[0] == "EVAL" && cmd[1] == "return redis.status_reply('FINE')" {
			// Neither go-redis nor rueidis tells a status from a
			// bulk string; a script's status comes back as []byte.
			assert.Equal(t, []byte("FINE"), got)
			continue
		}
		assert.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr), "%v", cmd)
		if cmd[0] == "HGETALL" {
			// A RESP3 map may come back in another order.
			w, err := redis.StringMap(want, nil)
			require.NoError(t, err)
			g, err := redis.StringMap(got, nil)
			require.NoError(t, err)
			assert.Equal(t, w, g)
			continue
		}
		assert.Equal(t, want, got, "%v: redigo %#v, adapter %#v", cmd, want, got)
	}

	// Send, Flush and Receive keep the order of the replies.
	c, err := src.GetContext(ctx)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Send("SET", "r:p", "x"))
	require.NoError(t, c.Send("GET", "r:p"))
	require.NoError(t, c.Send("DEL", "r:p"))
	require.NoError(t, c.Flush())
	for _, want := range []any{"OK", []byte("x"), int64(1)} {
		v, err := c.Receive()
		require.NoError(t, err)
		assert.Equal(t, want, v)
	}
	assert.ErrorIs(t, c.Send("SUBSCRIBE", "ch"), adapt.ErrPubSub)
}

func doOn(t *testing.T, ctx context.Context, src locklab.ConnSource, cmd []any) (any, error) {
	t.Helper()
	c, err := src.GetContext(ctx)
	require.NoError(t, err)
	defer c.Close()
	return redis.DoContext(c, ctx, cmd[0].(string), cmd[1:]...)
}

// ScriptFallback runs a script through the adapter on a server that does
// not know it (SCRIPT FLUSH): the first run answers NOSCRIPT to EVALSHA and
// is sent again with EVAL, which loads it; the second is one EVALSHA.
func ScriptFallback(t *testing.T, newSource NewSource) {
	s := redistest.StartOne(t)
	src := newSource(t, s.Addr)
	ctx := context.Background()
	script := rcmd.NewScript("adaptertest.set-get", 1, "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])")
	s.Do(t, "SCRIPT", "FLUSH")
	s.Do(t, "CONFIG", "RESETSTAT")
	exists := func() int64 {
		vs, err := redis.Int64s(s.Do(t, "SCRIPT", "EXISTS", script.Hash()), nil)
		require.NoError(t, err)
		return vs[0]
	}
	require.Equal(t, int64(0), exists())
	for i := range 2 {
		c, err := src.GetContext(ctx)
		require.NoError(t, err)
		v, err := script.Do(ctx, c, "sf:k", "v"+strconv.Itoa(i))
		c.Close()
		require.NoError(t, err)
		assert.Equal(t, []byte("v"+strconv.Itoa(i)), v)
		assert.Equal(t, int64(1), exists(), "EVAL after NOSCRIPT loads the script")
	}
	calls := CommandCalls(t, s)
	assert.Equal(t, [2]int{2, 1}, [2]int{calls["evalsha"], calls["eval"]},
		"one NOSCRIPT answered with EVAL, then EVALSHA alone: %v", calls)

	// And through a strategy that runs scripts, after another flush.
	s.Do(t, "SCRIPT", "FLUSH")
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: src})
	require.NoError(t, err)
	lease, err := l.Acquire(ctx, "sf:lock", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx, lease))
	assert.Equal(t, int64(0), s.Do(t, "EXISTS", "sf:lock"))
}

// Transaction sends MULTI ... EXEC through the adapter while other
// connections of the same source send commands: the transaction's commands
// stay on one connection and EXEC returns their replies.
func Transaction(t *testing.T, newSource NewSource) {
	s := redistest.StartOne(t)
	src := newSource(t, s.Addr)
	ctx := context.Background()
	c, err := src.GetContext(ctx)
	require.NoError(t, err)
	other, err := src.GetContext(ctx)
	require.NoError(t, err)
	defer other.Close()
	do := func(c redis.Conn, cmd string, args ...any) any {
		v, err := redis.DoContext(c, ctx, cmd, args...)
		require.NoError(t, err, cmd)
		return v
	}
	assert.Equal(t, "OK", do(c, "MULTI"))
	assert.Equal(t, "QUEUED", do(c, "INCR", "tx:n"))
	assert.Equal(t, int64(0), do(other, "EXISTS", "tx:n"), "queued, not run")
	assert.Equal(t, "QUEUED", do(c, "SET", "tx:s", "v"))
	assert.Equal(t, "QUEUED", do(c, "PEXPIRE", "tx:n", 60000))
	assert.Equal(t, []any{int64(1), "OK", int64(1)}, do(c, "EXEC"))
	assert.Equal(t, []byte("v"), do(other, "GET", "tx:s"))

	// A transaction left open by Close is discarded, and the connection
	// that carried it serves plain commands again.
	assert.Equal(t, "OK", do(c, "MULTI"))
	assert.Equal(t, "QUEUED", do(c, "SET", "tx:s", "discarded"))
	require.NoError(t, c.Close())
	for range 4 {
		c, err := src.GetContext(ctx)
		require.NoError(t, err)
		assert.Equal(t, []byte("v"), do(c, "GET", "tx:s"))
		assert.Equal(t, "OK", do(c, "MULTI"))
		assert.Equal(t, []any{}, do(c, "EXEC"))
		c.Close()
	}
}

// Errors: a Redis error reply is a redis.Error (the strategies tell a
// server's answer from a failure to reach it), a server that is gone is
// ErrUnavailable, a cancelled context is ErrUnavailable wrapping
// context.Canceled.
func Errors(t *testing.T, newSource NewSource) {
	s := redistest.StartOne(t)
	src := newSource(t, s.Addr)
	ctx := context.Background()
	c, err := src.GetContext(ctx)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Do("SET", "e:k", "notanumber")
	require.NoError(t, err)
	_, err = c.Do("INCR", "e:k")
	var re redis.Error
	require.True(t, errors.As(err, &re), "want a redis.Error, got %T %v", err, err)
	assert.Contains(t, err.Error(), "not an integer")
	_, err = rcmd.Do(ctx, c, "NOSUCHCOMMAND")
	assert.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.Contains(t, err.Error(), "unknown command")

	l, err := strategies.New("set-nx-px", locklab.Config{Pool: src})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Acquire(cctx, "e:lock", time.Minute)
	assert.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.ErrorIs(t, err, context.Canceled)

	s.Stop()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = l.Acquire(tctx, "e:lock", time.Minute)
	assert.ErrorIs(t, err, locklab.ErrUnavailable)
	assert.NoError(t, tctx.Err(), "a server that is gone fails the acquire, it does not hang")
}

// Conformance runs strategytest for every registered strategy through the
// adapter: one server for the single-node ones, with a replica for those
// that wait for one (set-nx-px-wait), five for the multi-node ones, each
// with its own client.
func Conformance(t *testing.T, newSource NewSource) {
	servers := redistest.Start(t, 5)
	redistest.StartReplica(t, servers[0])
	nodes := make([]locklab.ConnSource, len(servers))
	for i, s := range servers {
		nodes[i] = newSource(t, s.Addr)
	}
	for _, name := range strategies.Names() {
		d, err := strategies.Info(name)
		require.NoError(t, err)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			strategytest.Run(t, name, func() locklab.Config {
				if d.Properties.MultiNode {
					return locklab.Config{Nodes: nodes}
				}
				return locklab.Config{Pool: nodes[0]}
			})
		})
	}
}
