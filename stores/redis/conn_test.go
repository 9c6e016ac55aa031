package redis

import (
	"context"
	"io"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/rcmd"
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

// Redis's error replies are recorded as harness.ErrorReply, alone or
// inside an EXEC's answer, which the history shows as ERR and its text;
// other errors and values are recorded as they are.
func TestRecordedErrorReplies(t *testing.T) {
	assert.Equal(t, harness.ErrorReply("WRONGTYPE bad"), recordedErr(redis.Error("WRONGTYPE bad")))
	assert.Equal(t, "[OK ERR EXECABORT x 1]", harness.FormatValue(recorded([]any{"OK", redis.Error("EXECABORT x"), int64(1)})))
	assert.Equal(t, io.EOF, recordedErr(io.EOF))
	assert.NoError(t, recordedErr(nil))
	assert.Equal(t, []byte("t1"), recorded([]byte("t1")))
}
