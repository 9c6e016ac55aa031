package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/strategies"
)

// run runs the CLI with args and returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errb.String(), err
}

func TestListJSON(t *testing.T) {
	out, _, err := run(t, "list", "--json")
	require.NoError(t, err)
	var ds []strategies.Description
	require.NoError(t, json.Unmarshal([]byte(out), &ds))
	assert.Len(t, ds, len(strategies.Names()))
	var raw []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, key := range []string{"name", "family", "summary", "source", "weaknesses", "properties"} {
		assert.Contains(t, raw[0], key, "lower-case keys, as in matrix --json")
	}
	out, _, err = run(t, "list", "--long")
	require.NoError(t, err)
	assert.Contains(t, out, "C1/C2")
	assert.NotRegexp(t, `(?i)\bseeds? [0-9]`, out, "articles are cited by title, never by a local file")
}

func TestScenariosJSON(t *testing.T) {
	out, _, err := run(t, "scenarios", "--json")
	require.NoError(t, err)
	var scs []struct {
		Name     string   `json:"name"`
		Programs []string `json:"programs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &scs))
	require.NotEmpty(t, scs)
	assert.Equal(t, "clock-skew", scs[0].Name)
	assert.Equal(t, []string{"acquire write release", "acquire write release"}, scs[0].Programs)
}

func TestRaceDemo(t *testing.T) {
	out, _, err := run(t, "race-demo", "--backend", "process")
	require.NoError(t, err)
	assert.Contains(t, out, "== setnx-del ==")
	assert.Contains(t, out, "c1 and c2 hold the lock at once")
	assert.Contains(t, out, "verdict: VIOLATED")
	assert.Contains(t, out, "== setnx-getset ==")
	assert.Contains(t, out, "refused")
	assert.Contains(t, out, "Redis 7", "says which Redis it ran on")
}

func TestExploreAndFailOnViolation(t *testing.T) {
	out, _, err := run(t, "explore", "--backend", "process", "-s", "setnx-del", "-x", "stale-recovery", "--first")
	require.NoError(t, err, "a found violation is a result, not an error")
	assert.Contains(t, out, "VIOLATED")
	assert.Contains(t, out, "shortest counterexample")

	_, _, err = run(t, "explore", "--backend", "process", "-s", "setnx-del", "-x", "stale-recovery", "--first", "--fail-on-violation")
	require.True(t, errors.Is(err, errViolation))

	out, _, err = run(t, "explore", "--backend", "process", "-s", "set-nx-px", "-x", "release-after-expiry")
	require.NoError(t, err)
	assert.Contains(t, out, "SAFE")
}

func TestBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"explore", "--backend", "process", "-s", "nope", "-x", "stale-recovery"},
		{"explore", "--backend", "process"},
		{"demo", "--backend", "process", "no-such-scenario"},
		{"stress", "--backend", "process", "-s", "nope"},
		{"race-demo", "--backend", "bogus"},
		{"race-demo", "--backend", "addrs", "--addr", "not an address"},
		{"list", "extra"},
	} {
		_, _, err := run(t, args...)
		require.Error(t, err, "%v", args)
		assert.False(t, errors.Is(err, errViolation))
	}
	_, _, err := run(t, "explore", "--backend", "process", "-s", "nope", "-x", "stale-recovery")
	assert.Contains(t, err.Error(), "set-nx-px", "an unknown strategy lists the valid names")
}

func TestHelp(t *testing.T) {
	for _, cmd := range []string{"list", "race-demo", "scenarios", "demo", "explore", "matrix", "stress"} {
		out, _, err := run(t, cmd, "--help")
		require.NoError(t, err)
		assert.True(t, strings.Contains(out, "Usage:"), "%s --help", cmd)
	}
}

func TestBench(t *testing.T) {
	out, _, err := run(t, "bench", "--backend", "process", "-s", "set-nx-px,setnx-getset", "--rounds", "1", "--cycles", "20")
	require.NoError(t, err)
	assert.Contains(t, out, "PING round trip")
	assert.Regexp(t, `set-nx-px\s+\S+\s+[0-9.]+\s+\d+\s+2\s`, out, "set-nx-px sends 2 commands per cycle")
	assert.Regexp(t, `setnx-getset\s+\S+\s+[0-9.]+\s+\d+\s+3\s`, out)
}

// TestAddrURL: --addr takes a redis:// URL with an ACL user and a database;
// stress's worker processes reach the server through it too.
func TestAddrURL(t *testing.T) {
	t.Parallel()
	s := redistest.StartOne(t)
	s.ACLUser(t, "alice", "s3cret")
	url := "redis://alice:s3cret@" + s.Addr + "/7"
	// The run deletes its keys when it ends: database 7 is watched while
	// it runs.
	var inDB7 atomic.Bool
	done := make(chan struct{})
	go func() {
		c := s.Pool.Get()
		defer c.Close()
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if info, err := redis.String(c.Do("INFO", "keyspace")); err == nil && strings.Contains(info, "db7:") {
				inDB7.Store(true)
			}
		}
	}()
	out, _, err := run(t, "stress", "--backend", "addrs", "--addr", url, "-s", "set-nx-px",
		"--processes", "--clients", "2", "--cycles", "4", "--duration", "2m", "--json")
	close(done)
	require.NoError(t, err)
	assert.Contains(t, out, `"violations"`)
	assert.Regexp(t, `"cycles":\s*[1-9]`, out, "the workers took the lock through the URL")
	assert.True(t, inDB7.Load(), "the run used database 7")
	info, err := redis.String(s.Do(t, "INFO", "keyspace"), nil)
	require.NoError(t, err)
	assert.NotContains(t, info, "db7:", "the run deleted its keys")

	_, _, err = run(t, "stress", "--backend", "addrs", "--addr", "redis://alice:wrong@"+s.Addr, "-s", "set-nx-px", "--duration", "1s")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WRONGPASS")
}

func TestStressFlags(t *testing.T) {
	out, _, err := run(t, "stress", "--backend", "process", "-s", "set-nx-px-del", "--cycles", "100", "--duration", "2m", "--first", "--json")
	require.NoError(t, err)
	assert.Contains(t, out, `"violations"`)

	_, _, err = run(t, "stress", "--backend", "addrs", "--addr", "127.0.0.1:1", "-s", "set-nx-px", "--node-faults", "pause")
	require.Error(t, err, "faults need control of the servers")
	_, _, err = run(t, "stress", "--backend", "process", "-s", "set-nx-px", "--node-faults", "explode")
	require.Error(t, err)
}

type closer struct{ err error }

func (c closer) Close() error { return c.err }

// TestCloseAndTell: what a command's servers could not remove is told in
// one line on stderr, and nothing is told when all went.
func TestCloseAndTell(t *testing.T) {
	var w bytes.Buffer
	closeAndTell(&w, closer{})
	assert.Empty(t, w.String())
	closeAndTell(&w, closer{errors.Join(errors.New("docker: removing network n1: in use"), errors.New("node n2: gone"))})
	assert.Equal(t, "locklab: not all removed: docker: removing network n1: in use; node n2: gone\n", w.String())
}
