package fault

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeMember is a member of fakeCluster: it records what is done to it.
type fakeMember struct {
	name    string
	running bool
	c       *fakeCluster
	stuck   bool // its restart never serves
}

func (m *fakeMember) Kill() { m.running = false; m.c.log = append(m.c.log, "kill "+m.name) }
func (m *fakeMember) Restart(ctx context.Context) error {
	m.c.log = append(m.c.log, "restart "+m.name)
	if m.stuck {
		<-ctx.Done()
		return ctx.Err()
	}
	m.running = true
	return nil
}
func (m *fakeMember) Running() bool  { return m.running }
func (m *fakeMember) Stop() error    { return nil }
func (m *fakeMember) Cont() error    { return nil }
func (m *fakeMember) String() string { return m.name }

// fakeCluster leads with its first running member in leaders' order.
type fakeCluster struct {
	ms      []*fakeMember
	leaders []string
	log     []string
}

func (c *fakeCluster) Leader(context.Context) (*fakeMember, error) {
	for _, name := range c.leaders {
		for _, m := range c.ms {
			if m.name == name && m.running {
				return m, nil
			}
		}
	}
	return nil, errors.New("no leader")
}
func (c *fakeCluster) WaitHealthy(context.Context) error { return nil }

func newFake(stuckB bool) (*fakeCluster, *MemberWipe[*fakeMember]) {
	c := &fakeCluster{leaders: []string{"b", "a", "c"}}
	for _, n := range []string{"a", "b", "c"} {
		c.ms = append(c.ms, &fakeMember{name: n, running: true, c: c, stuck: stuckB && n == "b"})
	}
	w := &MemberWipe[*fakeMember]{Quorum: c, Members: func() []*fakeMember { return c.ms }, RejoinWait: 50 * time.Millisecond,
		StartEmpty: func(_ context.Context, m *fakeMember) (<-chan error, error) {
			c.log = append(c.log, "empty "+m.name)
			m.running = true
			done := make(chan error, 1)
			done <- nil
			return done, nil
		},
		Reset: func(context.Context) error {
			c.log = append(c.log, "reset")
			for _, m := range c.ms {
				m.running = true
			}
			return nil
		}}
	return c, w
}

// TestMemberWipe: Lag kills a follower; Wipe kills the other follower and
// then the leader, starts the first emptied before the lagging one, and
// the leader last; Recover starts the cluster afresh after a Wipe, and
// only the lagging member after a Lag alone.
func TestMemberWipe(t *testing.T) {
	ctx := context.Background()
	c, w := newFake(false)
	if err := w.Wipe(ctx); err == nil {
		t.Error("a Wipe without a Lag")
	}
	if !Supports(w, MemberLoss) {
		t.Error("a MemberWipe does not support MemberLoss")
	}
	if err := Begin(ctx, w, MemberLoss); err != nil {
		t.Fatal(err)
	}
	if err := End(ctx, w, MemberLoss); err != nil {
		t.Fatal(err)
	}
	want := "kill c, kill a, kill b, empty a, restart c, restart b"
	if got := strings.Join(c.log, ", "); got != want {
		t.Errorf("the steps: %s; want %s", got, want)
	}
	if n := w.Note(); !strings.Contains(n, "C starts with an emptied data directory, then A, which lagged: C leads") || !strings.Contains(n, "B rejoins") {
		t.Errorf("note %q", n)
	}
	c.log = nil
	if reset, err := w.Recover(ctx); err != nil || !reset {
		t.Errorf("Recover after a Wipe: reset %v, %v", reset, err)
	}
	if reset, err := w.Recover(ctx); err != nil || reset || len(c.log) != 1 {
		t.Errorf("a second Recover: reset %v, %v, %v", reset, err, c.log)
	}

	c, w = newFake(false)
	if err := w.Lag(ctx); err != nil {
		t.Fatal(err)
	}
	c.log = nil
	if reset, err := w.Recover(ctx); err != nil || reset || strings.Join(c.log, ", ") != "restart c" {
		t.Errorf("Recover after a Lag alone: reset %v, %v, %v", reset, err, c.log)
	}

	// The lag strikes the last follower in the cluster's order, never the
	// first member while another follower runs: a run's clients stay on
	// the first server.
	c, w = newFake(false)
	c.leaders = []string{"c", "a", "b"}
	if err := w.Lag(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.log, ", "); got != "kill b" {
		t.Errorf("with c leading, Lag did %q; want kill b", got)
	}
}

// TestMemberWipeLeavesStuckLeaderDown: a leader that does not serve again
// within RejoinWait is killed and said so; the others go on.
func TestMemberWipeLeavesStuckLeaderDown(t *testing.T) {
	ctx := context.Background()
	c, w := newFake(true)
	if err := w.Lag(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Wipe(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.Note(); !strings.Contains(n, "B does not rejoin within 50ms, and is left down") {
		t.Errorf("note %q", n)
	}
	if c.ms[1].running || !c.ms[0].running || !c.ms[2].running {
		t.Errorf("running: a %v, b %v, c %v", c.ms[0].running, c.ms[1].running, c.ms[2].running)
	}
}

// refusing refuses MemberLoss.
type refusing struct{ *MemberWipe[*fakeMember] }

func (refusing) Refuses(f Fault) string {
	if f == MemberLoss {
		return "not here"
	}
	return ""
}

// TestRefusal: a node that refuses a fault it has the methods of does not
// support it, and Begin says why.
func TestRefusal(t *testing.T) {
	_, w := newFake(false)
	n := refusing{w}
	if Supports(n, MemberLoss) || Refusal(n, MemberLoss) != "not here" {
		t.Error("a refused fault is supported")
	}
	err := Begin(context.Background(), n, MemberLoss)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "not here") {
		t.Errorf("Begin: %v", err)
	}
}
