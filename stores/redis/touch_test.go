package redis

import (
	"testing"

	"github.com/locklab/locklab/internal/tooling/namespace"
)

// TestRedisTouch: a Redis command declares the keys it names (a script its
// KEYS, not its ARGV), a transaction's queued commands nothing and its EXEC
// their union with the watched keys, and an unknown command or WAIT
// everything.
func TestRedisTouch(t *testing.T) {
	k := &conn{}
	get := k.touchOf(0, "GET", []any{"a"}, nil, false)
	set := k.touchOf(0, "SET", []any{"b", "v", "NX"}, nil, false)
	eval := k.touchOf(0, "EVALSHA", []any{"sha", "1", "a", "b"}, nil, false)
	if get.Conflicts(set) || !eval.Conflicts(get) || eval.Conflicts(set) {
		t.Errorf("GET a / SET b / script on KEYS a: %v %v %v", get, set, eval)
	}
	if k.touchOf(0, "WAIT", []any{1, 0}, nil, false) != nil || k.touchOf(0, "FLUSHALL", nil, nil, false) != nil {
		t.Error("WAIT or an unknown command declares a footprint")
	}
	if on1, on2 := k.touchOf(1, "SET", []any{"a", 1}, nil, false), k.touchOf(2, "SET", []any{"a", 1}, nil, false); on1.Conflicts(on2) {
		t.Error("one key on two independent masters conflicts")
	}
	// WATCH a, MULTI, SET b (queued), EXEC: the SET touches nothing when
	// queued, EXEC writes b and reads a.
	k.touchOf(0, "WATCH", []any{"a"}, nil, false)
	k.touchOf(0, "MULTI", nil, nil, false)
	if q := k.touchOf(0, "SET", []any{"b", 1}, nil, true); q.Conflicts(set) {
		t.Errorf("a queued SET touches %v", q)
	}
	exec := k.touchOf(0, "EXEC", nil, nil, true)
	if !exec.Conflicts(set) || !exec.Conflicts(k.touchOf(0, "SET", []any{"a", 1}, nil, false)) || exec.Conflicts(get) {
		t.Errorf("EXEC touches %v", exec)
	}
	// A pipeline MULTI SET c EXEC touches c.
	pipe := k.touchOf(0, "EXEC", nil, [][]any{{"MULTI"}, {"SET", "c", 1}}, false)
	if !pipe.Conflicts(k.touchOf(0, "GET", []any{"c"}, nil, false)) {
		t.Errorf("the pipeline touches %v", pipe)
	}
}

// TestRedisTouchNamespace: in a namespace (the addrs backend, one per
// worker), keys are named without its tag, so that two workers' steps
// compare.
func TestRedisTouchNamespace(t *testing.T) {
	a, b := &conn{st: &redisStore{ns: namespace.New()}}, &conn{st: &redisStore{ns: namespace.New()}}
	ka, kb := a.st.ns.Key("lock:x"), b.st.ns.Key("lock:x")
	ta, tb := a.touchOf(0, "SET", []any{ka, 1}, nil, false), b.touchOf(0, "GET", []any{kb}, nil, false)
	if !ta.Conflicts(tb) || ta.Writes[0] != "key:lock:x" {
		t.Errorf("the lock key in two namespaces: %v and %v", ta, tb)
	}
}
