package redisnode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
)

// On docker, a kill and a restart replace the redis-server process inside a
// container that stays up, and a partition takes its interface down; where
// the image has no ip command the engine disconnects it instead, and that
// cuts it off as well.
func TestDockerFaultsInsideContainer(t *testing.T) {
	t.Parallel()
	skipShort(t)
	requireDocker(t)
	n := start(t, Options{Backend: backends.Docker, N: 1}).Nodes()[0]
	s := n.srv.(*dockerServer)
	if !s.supervised {
		t.Skipf("image %s has no /bin/sh: its containers restart whole", s.b.image.name)
	}
	ctx := ctxT(t)
	started := func() string {
		c, err := s.b.cli.InspectContainerWithContext(s.id, ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID + " started " + c.State.StartedAt.String()
	}
	before, id := started(), serverID(t, n)
	if err := n.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{true, false} {
		if err := n.Restart(ctx, keep); err != nil {
			t.Fatal(err)
		}
		if now := serverID(t, n); now == id {
			t.Errorf("restart(keep=%v): the same server %s", keep, id)
		} else {
			id = now
		}
	}
	if after := started(); after != before {
		t.Errorf("the container was restarted: %s, then %s", before, after)
	}
	for _, viaEngine := range []bool{false, true} {
		if viaEngine {
			s.b.ipLink.Store(-1)
		}
		if err := n.Partition(ctx); err != nil {
			t.Fatal(err)
		}
		if s.linkDown == viaEngine {
			t.Errorf("partition by the engine %v, yet linkDown = %v", viaEngine, s.linkDown)
		}
		if err := reach(n, 300*time.Millisecond); err == nil {
			t.Fatalf("a partitioned node answers (by the engine: %v)", viaEngine)
		}
		if err := n.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		if err := reach(n, 2*time.Second); err != nil {
			t.Fatalf("after Heal (by the engine: %v): %v", viaEngine, err)
		}
		if now := serverID(t, n); now != id {
			t.Errorf("a partition replaced the server: %s, then %s", id, now)
		}
	}
}

// A supervisor command whose caller stops waiting (a start's liveness check
// cut short by the end of the start) leaves the supervisor usable: its late
// answer is dropped, and the next command gets its own. A command on a
// context that has ended already gets the context's error every time, even
// when its answer (or an earlier one) is there by the time it looks.
func TestDockerSupervisorAfterCancelledCommand(t *testing.T) {
	t.Parallel()
	skipShort(t)
	requireDocker(t)
	n := start(t, Options{Backend: backends.Docker, N: 1}).Nodes()[0]
	s := n.srv.(*dockerServer)
	if !s.supervised {
		t.Skipf("image %s has no /bin/sh: its containers restart whole", s.b.image.name)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 3; i++ {
		if _, err := s.sup.Do(done, "alive", nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("a command on a cancelled context: %v, want context.Canceled", err)
		}
	}
	ctx := ctxT(t)
	if a, err := s.sup.Do(ctx, "alive", nil); err != nil || a != "yes" {
		t.Fatalf("alive after cancelled commands: %q, %v; want yes", a, err)
	}
	if err := n.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
}

// A fault that reaches a supervised docker node after it was closed (a run
// interrupted in the middle of a restart) fails with an error, not a panic.
func TestDockerRestartAfterClose(t *testing.T) {
	t.Parallel()
	skipShort(t)
	requireDocker(t)
	n := start(t, Options{Backend: backends.Docker, N: 1}).Nodes()[0]
	s := n.srv.(*dockerServer)
	if !s.supervised {
		t.Skipf("image %s has no /bin/sh: its containers restart whole", s.b.image.name)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for _, keep := range []bool{true, false} {
		if err := s.restart(ctx, keep); !errors.Is(err, dockerbox.ErrContainerRemoved) {
			t.Fatalf("restart(keepData %v) of a removed container: %v, want dockerbox.ErrContainerRemoved", keep, err)
		}
	}
}
