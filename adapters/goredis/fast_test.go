package goredis_test

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/goredis"
	"github.com/locklab/locklab/adapters/internal/adaptertest"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

// names is a go-redis hook that records the name of every command the
// client sends, pipelined or not.
type names struct {
	mu   sync.Mutex
	sent []string
}

func (h *names) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *names) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}

func (h *names) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.add(cmds...)
		return next(ctx, cmds)
	}
}

func (h *names) add(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		h.sent = append(h.sent, c.Name())
	}
}

// take returns the names recorded since the last take.
func (h *names) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sent
	h.sent = nil
	return s
}

// A set-nx-px cycle through the adapter costs its two commands and
// nothing else: the client's hook sees one EVALSHA for the acquire and one
// for the release, and so does the server; only the first cycle on a
// server that does not know the scripts adds an EVAL for each.
func TestCycleSendsTwoCommands(t *testing.T) {
	s := redistest.StartOne(t)
	h := &names{}
	c := client(s.Addr)
	c.AddHook(h)
	defer c.Close()
	l, err := strategies.New("set-nx-px", locklab.Config{Pool: goredis.New(c)})
	require.NoError(t, err)
	ctx := context.Background()
	cycle := func() {
		_, err := l.Acquire(ctx, "fast:cycle", 0)
		require.Error(t, err, "a zero TTL is refused before anything is sent")
		lease, err := l.Acquire(ctx, "fast:cycle", 10e9)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx, lease))
	}

	s.Do(t, "SCRIPT", "FLUSH")
	cycle()
	var first []string
	for _, name := range h.take() {
		if name != "hello" && name != "client" { // the connection's handshake
			first = append(first, name)
		}
	}
	assert.Equal(t, []string{"evalsha", "eval", "evalsha", "eval"}, first, "the first cycle loads the scripts")

	s.Do(t, "CONFIG", "RESETSTAT")
	const n = 200
	for range n {
		cycle()
	}
	sent := h.take()
	assert.Len(t, sent, 2*n)
	for _, name := range sent {
		require.Equal(t, "evalsha", name)
	}
	calls := adaptertest.CommandCalls(t, s)
	assert.Equal(t, 2*n, calls["evalsha"], "%v", calls)
	assert.Zero(t, calls["eval"], "no NOSCRIPT after the first cycle: %v", calls)
	for name := range calls {
		// Besides the scripts, only their own calls are counted.
		assert.Contains(t, []string{"evalsha", "config|resetstat", "get", "type", "set", "incr", "pttl", "del"}, name, "%v", calls)
	}
}
