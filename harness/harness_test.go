package harness

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// redisStore is the name Redis's store registers (stores/redis, which
// redis_test.go links in): the Main store, the nodes' of the tests that
// run on redis-server.
const redisStore = "redis"

func nodesOf(servers []*redistest.Server) []Node {
	out := make([]Node, len(servers))
	for i, s := range servers {
		out[i] = AddrNode{NodeName: "n" + string(rune('1'+i)), NodeAddr: s.Addr, NodeStore: redisStore}
	}
	return out
}

func mustCase(t testing.TB, scenario, strategy string) Case {
	t.Helper()
	c, err := Resolve(scenario, strategy)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustLookup(t testing.TB, scenario string) *Scenario {
	t.Helper()
	sc, err := Lookup(scenario)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestScheduleRoundTrip(t *testing.T) {
	text := "c3 time c1 c2 c1@n2 time(+5s) crash(c1) pause(c2) resume(c2) skew(c2,+32s) skew(c1,-1s) " +
		"isolate(c1) rejoin(c1) terminate(c2) lose(c1) expire(n2) kill(n1) restart(n1) restart(n2,keep) restart(n3,delayed) pause(n3) resume(n3) partition(n1) heal(n1) failover(n1)"
	s, err := ParseSchedule(text + " # comment\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != text {
		t.Fatalf("round trip:\n got %s\nwant %s", got, text)
	}
	s2, err := ParseSchedule(s.String())
	if err != nil || s2.String() != text {
		t.Fatalf("second parse: %v %v", s2, err)
	}
	for _, bad := range []string{"x1", "c0", "crash(n1)", "terminate(n1)", "time(+x)", "skew(c1)", "foo(c1)", "c1@x"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	p := mustParseProgram("acquire*3 write sleep(20s) release crash")
	if p.String() != "acquire*3 write sleep(20s) release crash" {
		t.Fatal(p.String())
	}
}

// TestTerminateNeedsAStoreThatEndsSessions: a terminate step on a store
// whose server cannot end a client's sessions (Redis: a lock there is a
// key, held by no connection) fails the run with an error that says so,
// rather than passing for a fault that struck.
func TestTerminateNeedsAStoreThatEndsSessions(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	_, err := Run(context.Background(), RunOptions{Case: mustCase(t, "pause-past-ttl", "set-nx-px"), Nodes: nodes,
		Schedule: "c1 terminate(c1) c2"})
	if err == nil || !strings.Contains(err.Error(), "cannot end a client's sessions") {
		t.Fatalf("terminate on Redis: %v", err)
	}
}

// TestLostReply: lose(c1) lets the server carry out c1's next command and
// drops the reply. incr-expire's INCR then leaves a key that no EXPIRE
// follows: every later client is refused for good, c1's own retry too.
// The one-script acquire set the TTL with the key: the lock comes back a
// TTL later. The step's event says the reply was lost and shows what the
// server answered.
func TestLostReply(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	for strategy, want := range map[string]Outcome{"incr-expire": Deadlock, "incr-expire-lua": Safe} {
		h, err := Run(context.Background(), RunOptions{Case: mustCase(t, "lost-reply", strategy), Nodes: nodes,
			Schedule: "lose(c1) c1 c1 c2"})
		if err != nil {
			t.Fatal(err)
		}
		if h.Verdict.Outcome != want {
			t.Errorf("%s: %v, want %s\n%s", strategy, h.Verdict, want, h.Schedule)
		}
		e := h.Events[1]
		if !slices.Contains(e.Notes, "the reply is lost: c1's connection drops") || e.Reply == "" || strings.Contains(e.Reply, "EOF") {
			t.Errorf("%s: the lost step's event: reply %q, notes %q", strategy, e.Reply, e.Notes)
		}
	}
}

// TestC1C2Deterministic: the C1/C2 schedule breaks setnx-del every time
// and never setnx-getset.
func TestC1C2Deterministic(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	ctx := context.Background()
	var first string
	for i := 0; i < 100; i++ {
		h, err := Run(ctx, RunOptions{Case: mustCase(t, "stale-recovery", "setnx-del"), Nodes: nodes, NoRecord: i > 0})
		if err != nil {
			t.Fatal(err)
		}
		if h.Verdict.Outcome != Violated || h.Verdict.Step != 10 {
			t.Fatalf("run %d on setnx-del: %v (schedule %s)", i, h.Verdict, h.Schedule)
		}
		if i == 0 {
			first = h.Schedule
			if _, err := h.JSON(); err != nil {
				t.Fatal(err)
			}
		} else if h.Schedule != first {
			t.Fatalf("run %d replayed differently: %s vs %s", i, h.Schedule, first)
		}
		g, err := Run(ctx, RunOptions{Case: mustCase(t, "stale-recovery", "setnx-getset"), Nodes: nodes, NoRecord: true})
		if err != nil {
			t.Fatal(err)
		}
		if g.Verdict.Outcome != Safe {
			t.Fatalf("run %d on setnx-getset: %v (schedule %s)", i, g.Verdict, g.Schedule)
		}
	}
}

func TestHistoryJSON(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	h, err := Run(context.Background(), RunOptions{Case: mustCase(t, "stale-recovery", "setnx-del"), Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back History
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Verdict.Outcome != Violated || len(back.Events) != len(h.Events) || back.Events[0].Keys == nil {
		t.Fatalf("JSON lost data: %+v", back.Verdict)
	}
}
