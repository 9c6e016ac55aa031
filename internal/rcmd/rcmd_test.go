package rcmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/adapt"
)

// sent runs s on a connection to a fake server that answers reply to the
// first command and OK to the second, and returns every command it read,
// as RESP arrays of strings.
func sent(t *testing.T, s Script, reply string, keysAndArgs ...any) [][]string {
	t.Helper()
	client, server := net.Pipe()
	defer client.Close()
	got := make(chan [][]string, 1)
	go func() {
		defer server.Close()
		r := bufio.NewReader(server)
		var cmds [][]string
		for i, answer := range []string{reply, "+OK\r\n"} {
			cmd, err := readCommand(r)
			if err != nil {
				break
			}
			cmds = append(cmds, cmd)
			server.Write([]byte(answer))
			if i == 0 && answer[0] != '-' {
				break
			}
		}
		got <- cmds
	}()
	c := redis.NewConn(client, 0, 0)
	_, _ = s.Do(context.Background(), c, keysAndArgs...)
	client.Close()
	return <-got
}

func readCommand(r *bufio.Reader) ([]string, error) {
	var n int
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Sscanf(line, "*%d\r\n", &n); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		var size int
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if _, err := fmt.Sscanf(line, "$%d\r\n", &size); err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		out[i] = string(buf[:size])
	}
	return out, nil
}

// A named script sends what an unnamed one would: its SHA1 with EVALSHA,
// its source with EVAL after NOSCRIPT; the name rides along for
// ScriptName alone.
func TestScriptSendsHashAndSourceAsTheyAre(t *testing.T) {
	const src = "return redis.call('get', KEYS[1])"
	s := NewScript("test.get", 1, src)
	sha := redis.NewScript(1, src).Hash()
	assert.Equal(t, sha, s.Hash())
	assert.Equal(t, "test.get", s.Name())

	cmds := sent(t, s, ":1\r\n", "k", "v")
	require.Len(t, cmds, 1)
	assert.Equal(t, []string{"EVALSHA", sha, "1", "k", "v"}, cmds[0])

	cmds = sent(t, s, "-NOSCRIPT No matching script.\r\n", "k", "v")
	require.Len(t, cmds, 2)
	assert.Equal(t, []string{"EVALSHA", sha, "1", "k", "v"}, cmds[0])
	assert.Equal(t, []string{"EVAL", src, "1", "k", "v"}, cmds[1])
}

// ScriptName finds the name in the first argument of a script's command,
// and the other clients' adapters write the value.
func TestScriptName(t *testing.T) {
	s := NewScript("test.get", 1, "return 1")
	name, ok := ScriptName(s.hash)
	assert.True(t, ok)
	assert.Equal(t, "test.get", name)
	name, ok = ScriptName(s.src)
	assert.True(t, ok)
	assert.Equal(t, "test.get", name)
	_, ok = ScriptName(s.Hash())
	assert.False(t, ok, "a plain SHA1 names no script")
	_, ok = ScriptName(nil)
	assert.False(t, ok)
	assert.Equal(t, s.Hash(), adapt.String(s.hash))
	assert.Equal(t, []any{s.Hash(), "return 1"}, adapt.Args([]any{s.hash, s.src}))
}
