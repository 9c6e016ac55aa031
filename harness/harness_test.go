package harness

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/redistest"
)

func nodesOf(servers []*redistest.Server) []Node {
	out := make([]Node, len(servers))
	for i, s := range servers {
		out[i] = AddrNode{NodeName: "n" + string(rune('1'+i)), NodeAddr: s.Addr}
	}
	return out
}

func TestScheduleRoundTrip(t *testing.T) {
	text := "c3 time c1 c2 c1@n2 time(+5s) crash(c1) pause(c2) resume(c2) skew(c2,+32s) skew(c1,-1s) " +
		"isolate(c1) rejoin(c1) expire(n2) kill(n1) restart(n1) restart(n2,keep) pause(n3) resume(n3) partition(n1) heal(n1) failover(n1)"
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
	for _, bad := range []string{"x1", "c0", "crash(n1)", "time(+x)", "skew(c1)", "foo(c1)", "c1@x"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	p := MustParseProgram("acquire*3 write sleep(20s) release crash")
	if p.String() != "acquire*3 write sleep(20s) release crash" {
		t.Fatal(p.String())
	}
}

// TestC1C2Deterministic: the C1/C2 schedule breaks setnx-del every time
// and never setnx-getset.
func TestC1C2Deterministic(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	ctx := context.Background()
	var first string
	for i := 0; i < 100; i++ {
		h, err := Run(ctx, RunOptions{Scenario: "stale-recovery", Strategy: "setnx-del", Nodes: nodes, NoRecord: i > 0})
		if err != nil {
			t.Fatal(err)
		}
		if h.Verdict.Outcome != Violated || h.Verdict.Step != 10 {
			t.Fatalf("run %d on setnx-del: %v\n%s", i, h.Verdict, Timeline(h))
		}
		if i == 0 {
			first = h.Schedule
			tl := Timeline(h)
			if !strings.Contains(tl, "c1 and c2 hold the lock at once") {
				t.Fatalf("timeline does not show the double hold:\n%s", tl)
			}
			for _, line := range strings.Split(tl, "\n") {
				if len(line) > 100 {
					t.Errorf("timeline line wider than 100 columns: %q", line)
				}
			}
			if _, err := h.JSON(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(Mermaid(h), "VIOLATION") {
				t.Fatal("mermaid diagram does not mark the violation")
			}
		} else if h.Schedule != first {
			t.Fatalf("run %d replayed differently: %s vs %s", i, h.Schedule, first)
		}
		g, err := Run(ctx, RunOptions{Scenario: "stale-recovery", Strategy: "setnx-getset", Nodes: nodes, NoRecord: true})
		if err != nil {
			t.Fatal(err)
		}
		if g.Verdict.Outcome != Safe {
			t.Fatalf("run %d on setnx-getset: %v\n%s", i, g.Verdict, Timeline(g))
		}
	}
}

func TestHistoryJSON(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	h, err := Run(context.Background(), RunOptions{Scenario: "stale-recovery", Strategy: "setnx-del", Nodes: nodes})
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

func TestRaceDemo(t *testing.T) {
	nodes := nodesOf(redistest.Start(t, 1))
	var b strings.Builder
	if err := RaceDemo(context.Background(), &b, nodes); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"c1 and c2 hold the lock at once", "refused", "verdict: SAFE", "Redis 7"} {
		if !strings.Contains(out, want) {
			t.Errorf("race demo output lacks %q:\n%s", want, out)
		}
	}
}
