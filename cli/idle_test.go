package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/redistest"
	"github.com/locklab/locklab/stores"
	"github.com/locklab/locklab/stores/etcd"
	"github.com/locklab/locklab/stores/postgres"
)

// TestIdleRunIsNoPass: a run that completed no critical section reports
// no pass, on every store stress runs on: exit status 2, and the text
// says why where "no violation" would be. A --duration of 1ns ends the
// run before any client tries.
func TestIdleRunIsNoPass(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		code, out, stderr := runStatus(t, "stress", "-s", "set-nx-px", "--backend", "process", "--duration", "1ns")
		assert.Equal(t, 2, code, stderr)
		assert.Contains(t, out, "cycles             0 in ")
		assert.Contains(t, out, "\nnothing to judge: no critical section completed\n")
		assert.NotContains(t, out, "no violation")
		assert.Contains(t, out, "linearizability    nothing to check: no operation\n")
		assert.True(t, strings.HasSuffix(stderr, "locklab: stress on set-nx-px: no critical section completed\n"), stderr)
	})
	t.Run("redis json", func(t *testing.T) {
		code, out, stderr := runStatus(t, "stress", "-s", "set-nx-px", "--backend", "process", "--duration", "1ns", "--json")
		assert.Equal(t, 2, code, stderr)
		var rep struct{ Cycles int64 }
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		assert.Zero(t, rep.Cycles)
		assert.True(t, strings.HasSuffix(stderr, "locklab: stress on set-nx-px: no critical section completed\n"), stderr)
	})
	t.Run("redis acquires refused", func(t *testing.T) {
		// A user that may not run the scripts the lock takes: every
		// acquire fails, and the text says how many and why. No cycle
		// can complete, so the run ends at --duration; what it needs
		// inside it is one acquire tried, which the clients (goroutines
		// of the run) send as they start. The duration stays inside the
		// starvation window (20 TTLs, 2s), past which the run would
		// rightly report starvation instead.
		s := redistest.StartOne(t)
		s.Do(t, "ACL", "SETUSER", "noscript", "on", ">pw", "~*", "&*", "+@all", "-set")
		code, out, stderr := runStatus(t, "stress", "-s", "set-nx-px", "--addr", "redis://noscript:pw@"+s.Addr,
			"--duration", "1s", "--clients", "2", "--crash-prob", "0")
		assert.Equal(t, 2, code, stderr)
		assert.Regexp(t, `\nerrors             \d+ acquires failed, the first: server unreachable or failed: ERR The user executing the script can't run this command`, out)
		assert.Regexp(t, `\nnothing to judge: no critical section completed; \d+ acquires failed, the first: server unreachable`, out)
		assert.Contains(t, stderr, "locklab: stress on set-nx-px: no critical section completed; ")
	})
	for _, st := range []struct{ store, strategy string }{{etcd.Name, "etcd-lease"}, {postgres.Name, "pg-advisory"}} {
		t.Run(st.store, func(t *testing.T) {
			if err := stores.Installed(st.store); err != nil {
				t.Skip(err)
			}
			code, out, stderr := runStatus(t, "stress", "-s", st.strategy, "--backend", "process", "--duration", "1ns")
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, out, "\nnothing to judge: no critical section completed\n")
			assert.True(t, strings.HasSuffix(stderr, "locklab: stress on "+st.strategy+": no critical section completed\n"), stderr)
		})
	}
	t.Run("matrix", func(t *testing.T) {
		// Every cell n/a: the matrix ran nothing.
		code, out, stderr := runStatus(t, "matrix", "-s", "setnx-del", "-x", "redlock-restart", "--backend", "process")
		assert.Equal(t, 2, code, stderr)
		assert.Contains(t, out, "setnx-del")
		assert.True(t, strings.HasSuffix(stderr, "locklab: no cell of the matrix ran a schedule, every one is n/a: not for this kind of strategy (1 cell)\n"), stderr)
	})
}

// TestStressPG: stress runs a PostgreSQL strategy on a PostgreSQL server
// of its own (this command line once ran a Redis server and reported a
// pass with no cycle): the advisory lock holds while its sessions live.
func TestStressPG(t *testing.T) {
	t.Parallel()
	if err := stores.Installed(postgres.Name); err != nil {
		t.Skip(err)
	}
	code, out, stderr := runStatus(t, "stress", "-s", "pg-advisory", "--backend", "process", "--cycles", "10", "--duration", "2m", "--clients", "2")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "PostgreSQL: process 127.0.0.1:")
	assert.NotContains(t, stderr, "Redis")
	assert.Regexp(t, `cycles +[1-9]\d* in `, out)
	assert.Contains(t, out, "\nno violation\n")
}
