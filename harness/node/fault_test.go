package node

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab"
)

func TestFaultNames(t *testing.T) {
	t.Parallel()
	for _, f := range Faults() {
		got, err := ParseFault(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFault(%q) = %v, %v; want %v", f.String(), got, err, f)
		}
	}
	want := "pause,kill,restart,restart-keep,partition,failover,cluster-failover,leader-kill"
	if got := JoinFaults(Faults()); got != want {
		t.Errorf("JoinFaults = %q, want %q", got, want)
	}
	for _, bad := range []string{"", "meteor", "Pause", "restart(n1)", "npause"} {
		if _, err := ParseFault(bad); !errors.Is(err, locklab.ErrInvalid) {
			t.Errorf("ParseFault(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if s := Fault(0).String(); s != "Fault(0)" {
		t.Errorf("zero Fault prints %q", s)
	}
}

func TestFaultJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal([]Fault{RestartKeep, Failover})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `["restart-keep","failover"]` {
		t.Errorf("JSON %s", b)
	}
	var back []Fault
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 2 || back[0] != RestartKeep || back[1] != Failover {
		t.Errorf("round trip: %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`["explode"]`), &back); !errors.Is(err, locklab.ErrInvalid) {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := json.Marshal(Fault(0)); err == nil {
		t.Error("the zero Fault marshals")
	}
}

// onlyRestarts can end a restart but begins no fault.
type onlyRestarts struct{ restarts int }

func (o *onlyRestarts) Restart(context.Context, bool) error { o.restarts++; return nil }

func TestSupports(t *testing.T) {
	t.Parallel()
	for _, f := range Faults() {
		if f == ClusterFailover || f == LeaderKill {
			// Run by harness/stress on a RedisCluster or an etcd
			// cluster, not by Begin.
			if Supports(&Node{}, f) || Supports((*Replicated)(nil), f) {
				t.Errorf("a node supports %v", f)
			}
			continue
		}
		if !Supports(&Node{}, f) && f != Failover {
			t.Errorf("*Node does not support %v", f)
		}
		if !Supports((*Replicated)(nil), f) {
			t.Errorf("*Replicated does not support %v", f)
		}
		if Supports(struct{}{}, f) {
			t.Errorf("an empty node supports %v", f)
		}
	}
	o := &onlyRestarts{}
	if Supports(o, Restart) {
		t.Error("a node that cannot be killed supports the whole of Restart")
	}
	ctx := context.Background()
	if err := End(ctx, o, Restart); err != nil || o.restarts != 1 {
		t.Errorf("End(Restart) on a Restarter: %v, %d restarts", err, o.restarts)
	}
	err := Begin(ctx, o, Restart)
	if !errors.Is(err, ErrNotImplemented) || !errors.Is(err, ErrUnsupported) {
		t.Errorf("Begin(Restart) without Kill: %v", err)
	}
}

// Begin and End drive a real node through each fault a stress run injects.
func TestBeginEnd(t *testing.T) {
	t.Parallel()
	n := start(t, Options{Backend: BackendProcess, N: 1}).Nodes()[0]
	ctx := ctxT(t)
	for _, f := range []Fault{Pause, Partition, Restart} {
		do(t, n, "SET", "k", "v")
		if err := Begin(ctx, n, f); err != nil {
			t.Fatalf("Begin(%v): %v", f, err)
		}
		if err := reach(n, 300*time.Millisecond); err == nil {
			t.Errorf("the node answers during %v", f)
		}
		if err := End(ctx, n, f); err != nil {
			t.Fatalf("End(%v): %v", f, err)
		}
		if err := reach(n, 5*time.Second); err != nil {
			t.Fatalf("the node does not answer after %v: %v", f, err)
		}
		_, kept := get(t, n, "k")
		if kept != (f != Restart) {
			t.Errorf("after %v the key is kept: %v", f, kept)
		}
	}
}
