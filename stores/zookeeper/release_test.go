package zookeeper

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/harnesstest"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/zklock"
)

// blindName is zk-ephemeral with a release broken on purpose: it deletes
// the lock's node whoever made it.
const blindName = "zk-ephemeral-blind-release"

// blindRelease is zk-ephemeral whose Release deletes the node at the
// lock's path at any version, as a blind DEL does on Redis.
type blindRelease struct {
	*zklock.EphemeralLock
	conn *zk.Conn
}

func (b blindRelease) Release(_ context.Context, lease locklab.Lease) error {
	return b.conn.Delete(b.Path(lease.Key), -1)
}

func init() {
	d, err := strategies.Info(zklock.EphemeralName)
	if err != nil {
		panic(err)
	}
	d.Name, d.BrokenByDesign = blindName, "its release deletes the lock's node whoever made it"
	strategies.MustRegister(d, func(cfg locklab.Config) (locklab.Locker, error) {
		l, err := zklock.NewEphemeralFromConfig(cfg)
		if err != nil {
			return nil, err
		}
		return blindRelease{EphemeralLock: l, conn: cfg.Store.(*zk.Conn)}, nil
	})
}

// TestWrongReleaseSeen: the wrongful-release check sees, on ZooKeeper, a
// release that deletes the node of the client that holds the lock. Probe
// shows the holder as the timeline names it, not as its Lease.Token, so
// the check asks the store whether the holder's node is still the lock
// (Holds). C1 pauses past its session timeout; its node goes with the
// session and C2 takes the lock; C1 wakes, writes and releases while C2
// holds. zk-ephemeral's release finds a node of another create and
// deletes nothing; the blind release deletes C2's node, and the check
// says so.
func TestWrongReleaseSeen(t *testing.T) {
	nodes := ensemble(t)
	// c1: create, exists (its fence), sleep; c2: create, exists, write;
	// then c1 writes and releases (exists and delete, or the blind delete).
	for _, tc := range []struct {
		strategy, schedule string
		wrong              bool
	}{
		{zklock.EphemeralName, "c1 c1 c1 c2 c2 c2 c1 c1 c1", false},
		{blindName, "c1 c1 c1 c2 c2 c2 c1 c1", true},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			cs, err := harness.Resolve("pause-past-ttl", tc.strategy)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			h, err := harness.Run(ctx, harness.RunOptions{Case: cs, Nodes: nodes, Schedule: tc.schedule})
			if err != nil {
				t.Fatal(err)
			}
			noted := harnesstest.Noted(h, "c1 deleted c2's lock")
			if noted != tc.wrong || (len(h.WrongRelease) > 0) != tc.wrong {
				t.Fatalf("%s: wrongful release %v (%v), want %v\n%s", h.Schedule, noted, h.WrongRelease, tc.wrong, timeline(h))
			}
			t.Logf("%s: %v\n%s", h.Schedule, h.Verdict, timeline(h))
		})
	}
}
