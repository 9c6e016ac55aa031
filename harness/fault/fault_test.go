package fault

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/locklab/locklab"
)

func TestFaultNames(t *testing.T) {
	t.Parallel()
	for _, f := range All() {
		got, err := Parse(f.String())
		if err != nil || got != f {
			t.Errorf("Parse(%q) = %v, %v; want %v", f.String(), got, err, f)
		}
	}
	want := "pause,kill,restart,restart-keep,partition,failover,cluster-failover,leader-kill,member-loss"
	if got := Join(All()); got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
	for _, bad := range []string{"", "meteor", "Pause", "restart(n1)", "npause"} {
		if _, err := Parse(bad); !errors.Is(err, locklab.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", bad, err)
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
	for _, f := range All() {
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
