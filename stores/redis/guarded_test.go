package redis

import (
	"context"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/internal/tooling/backends"
)

// staleSchedule has c1 take the lock and stop past its TTL, c2 take it and
// write, and c1 write: its guarded write is stale.
const staleSchedule = "c1 c1 c2 c2 c1"

// guardedRun runs pause-past-ttl-guarded on strategy with staleSchedule.
func guardedRun(t *testing.T, nodes []harness.Node, strategy string) (harness.Outcome, string) {
	t.Helper()
	return harnesstest.GuardedRun(t, nodes, "pause-past-ttl-guarded", strategy, staleSchedule)
}

// TestGuardedWriteRefusesStaleToken: on a real redis-server, the guarded
// write of a holder past its TTL is refused where its token tells it from
// its successor's (set-nx-px's random token), and goes through where every
// holder's token is the same (incr-expire-lua's 1). A guard planted broken
// (a script that writes without comparing) lets the stale write through,
// and the run is VIOLATED: the check catches it.
func TestGuardedWriteRefusesStaleToken(t *testing.T) {
	d, err := harness.MainStore()
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.StartNodes(context.Background(), harness.NodesOptions{Backend: backends.Process, N: 1, Label: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	if out, stale := guardedRun(t, s.Nodes, "set-nx-px"); out != harness.Safe || stale != "refused" {
		t.Errorf("set-nx-px: %v, c1's stale write %s; want SAFE, refused", out, stale)
	}
	if out, stale := guardedRun(t, s.Nodes, "incr-expire-lua"); out != harness.Violated || stale != "accepted" {
		t.Errorf("incr-expire-lua: %v, c1's stale write %s; want VIOLATED, accepted (every token is 1)", out, stale)
	}

	checked := guardScript
	guardScript = redis.NewScript(2, `redis.call('set', KEYS[2], ARGV[2]) return 1`)
	t.Cleanup(func() { guardScript = checked })
	if out, stale := guardedRun(t, s.Nodes, "set-nx-px"); out != harness.Violated || stale != "accepted" {
		t.Errorf("set-nx-px with a guard that checks nothing: %v, c1's stale write %s; want VIOLATED, accepted", out, stale)
	}
}

// TestRedlockHasNoGuard: Redlock's lock is a majority of masters, which no
// one script can check: the guarded scenarios are n/a on it, with the
// reason, and apply to set-nx-px.
func TestRedlockHasNoGuard(t *testing.T) {
	if why, ok := harness.GuardOf("redlock"); ok || why != unguardedRedlock {
		t.Errorf("GuardOf(redlock) = %q, %v; want the reason, false", why, ok)
	}
	if what, ok := harness.GuardOf("set-nx-px"); !ok || what != guardToken {
		t.Errorf("GuardOf(set-nx-px) = %q, %v; want its token guard, true", what, ok)
	}
}
