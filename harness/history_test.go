package harness

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

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

// An error a server answered shows as ERR and its text, alone or inside
// a reply; another error as error:.
func TestErrorReplies(t *testing.T) {
	assert.Equal(t, "ERR WRONGTYPE bad", fmtReply(nil, ErrorReply("WRONGTYPE bad")))
	assert.Equal(t, "[OK ERR EXECABORT x 1]", fmtReply([]any{"OK", ErrorReply("EXECABORT x"), int64(1)}, nil))
	assert.Equal(t, "error: EOF", fmtReply(nil, io.EOF))
	assert.Equal(t, `"t1"`, fmtReply([]byte("t1"), nil))
}
