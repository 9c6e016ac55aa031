package harness

import (
	"context"
	"io"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/internal/tooling/wrapconn"
)

// scriptCalls runs s through a wrapped connection whose hook answers
// NOSCRIPT to EVALSHA and 1 to EVAL, without a server, and returns the
// calls the hook saw.
func scriptCalls(t *testing.T, s rcmd.Script, keysAndArgs ...any) []wrapconn.Call {
	t.Helper()
	var calls []wrapconn.Call
	src := &wrapconn.Source{Open: func(context.Context) (wrapconn.Hooks, error) {
		return wrapconn.Hooks{Do: func(_ context.Context, call wrapconn.Call, _ wrapconn.Send) (any, error) {
			calls = append(calls, call)
			if call.Cmd == "EVALSHA" {
				return nil, redis.Error("NOSCRIPT No matching script. Please use EVAL.")
			}
			return int64(1), nil
		}}, nil
	}}
	c, err := src.GetContext(context.Background())
	require.NoError(t, err)
	defer c.Close()
	v, err := s.Do(context.Background(), c, keysAndArgs...)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
	return calls
}

// A script's step shows its name, keys and arguments, for EVALSHA and for
// the EVAL after NOSCRIPT; a script without a name shows as its SHA1.
func TestRedisCommandNamesScripts(t *testing.T) {
	s := rcmd.NewScript("set-nx-px.acquire", 2, "return 1")
	calls := scriptCalls(t, s, "orders:42", "orders:42:fence", "tok1", int64(100))
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"EVALSHA", "set-nx-px.acquire", "orders:42", "orders:42:fence", "tok1", "100"},
		redisCommand(calls[0].Cmd, calls[0].Args))
	assert.Equal(t, []string{"EVAL", "set-nx-px.acquire", "orders:42", "orders:42:fence", "tok1", "100"},
		redisCommand(calls[1].Cmd, calls[1].Args))

	sha := s.Hash()
	assert.Equal(t, []string{"EVALSHA", "sha:" + sha[:8], "1", "k"}, redisCommand("EVALSHA", []any{sha, 1, "k"}))
	assert.Equal(t, []string{"EVAL", "<script>", "0"}, redisCommand("EVAL", []any{"return 1", 0}))
	assert.Equal(t, []string{"GET", "k"}, redisCommand("GET", []any{"k"}))
}

// On a real server, a set-nx-px timeline names its scripts, with the lock
// key after the name; on a server whose script cache was flushed, the EVAL
// that follows NOSCRIPT names the script too, in the same step, and the run
// takes the same steps.
func TestSetNXPXTimelineNamesItsScripts(t *testing.T) {
	servers := redistest.Start(t, 1)
	nodes := nodesOf(servers)
	run := func() *History {
		t.Helper()
		h, err := Run(context.Background(), RunOptions{Case: mustCase(t, "pause-past-ttl", "set-nx-px"), Nodes: nodes, NoRecord: true})
		require.NoError(t, err)
		return h
	}
	servers[0].Do(t, "SCRIPT", "FLUSH")
	cold := run()
	warm := run()
	assert.Equal(t, warm.Schedule, cold.Schedule, "the script cache changes no step")
	assert.Equal(t, warm.Verdict, cold.Verdict)
	names := map[string]bool{}
	evals := 0
	for _, e := range cold.Events {
		if len(e.Command) >= 3 && e.Command[0] == "EVALSHA" {
			names[e.Command[1]] = true
			assert.Equal(t, cold.Key, e.Command[2], "the lock key follows the script's name: %v", e.Command)
		}
		if len(e.Extra) >= 2 {
			evals++
			assert.Equal(t, "EVAL", e.Extra[0])
			assert.Equal(t, e.Command[1], e.Extra[1], "the EVAL after NOSCRIPT names the script")
		}
	}
	assert.True(t, names["set-nx-px.acquire"], "acquire named: %v", names)
	assert.True(t, names["set-nx-px.release"], "release named: %v", names)
	assert.Positive(t, evals, "the flushed server answered NOSCRIPT")
	for _, e := range warm.Events {
		assert.Empty(t, e.Extra, "a warm server runs every script by EVALSHA")
	}
}

// A server's error reply shows as ERR and its text, alone or inside an
// EXEC's answer, once the Redis store records it; another error as error:.
func TestRecordedErrorReplies(t *testing.T) {
	assert.Equal(t, "ERR WRONGTYPE bad", fmtReply(recorded(nil), recordedErr(redis.Error("WRONGTYPE bad"))))
	assert.Equal(t, "[OK ERR EXECABORT x 1]", fmtReply(recorded([]any{"OK", redis.Error("EXECABORT x"), int64(1)}), recordedErr(nil)))
	assert.Equal(t, "error: EOF", fmtReply(nil, recordedErr(io.EOF)))
	assert.Equal(t, `"t1"`, fmtReply(recorded([]byte("t1")), nil))
}
