package zklock_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies/strategytest"
	"github.com/locklab/locklab/strategies/zklock"
)

// TestConformance runs the suite on each strategy, each Locker on a
// connection, and so a session, of its own. A lock lapses when its
// session ends, which Expire does as a second client that knows the
// session's password can (closeSession), while the holder's connection is
// cut off; the expiry the store keeps is the session timeout.
func TestConformance(t *testing.T) {
	for _, name := range []string{zklock.RecipeName, zklock.EphemeralName, zklock.GolibName} {
		t.Run(name, func(t *testing.T) {
			strategytest.RunStore(t, name, zkStore(t, name))
		})
	}
}

// zkStore is the shared ensemble as the suite sees it, for the strategy
// name.
func zkStore(t *testing.T, name string) strategytest.Store {
	addrs := servers(t)
	return strategytest.Store{
		NewConfig: func(t *testing.T) locklab.Config {
			conn, _ := dial(t, addrs)
			return locklab.Config{Store: conn}
		},
		RoundTrip: func(cfg locklab.Config) error {
			_, _, err := cfg.Store.(*zk.Conn).Exists("/")
			return err
		},
		Expire: func(t *testing.T, cfg locklab.Config, _ locklab.Lease) {
			expire(t, addrs, cfg.Store.(*zk.Conn))
		},
		Holds: func(t *testing.T, cfg locklab.Config, key string) bool {
			conn := cfg.Store.(*zk.Conn)
			if name == zklock.EphemeralName {
				ok, _, err := synced(t, conn).Exists(zklock.Path(name, key))
				require.NoError(t, err)
				return ok
			}
			return len(children(t, conn, zklock.Path(name, key))) > 0
		},
		Expiry: func(t *testing.T, cfg locklab.Config, lease locklab.Lease) (time.Duration, bool) {
			conn := cfg.Store.(*zk.Conn)
			node := lockNode(t, conn, name, lease)
			ok, stat, err := synced(t, conn).Exists(node)
			require.NoError(t, err)
			require.True(t, ok, "the lock's node %s", node)
			_, _, granted := wireOf(t, conn).session()
			return granted, stat.EphemeralOwner == conn.SessionID()
		},
		Sent: func(ttl time.Duration) time.Duration { return ttl }, // no server sees it
		Unreachable: func(t *testing.T) locklab.Config {
			conn, _, err := zk.Connect([]string{deadAddr(t)}, sessionTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
			require.NoError(t, err)
			t.Cleanup(conn.Close)
			return locklab.Config{Store: conn}
		},
		NilClient: func(*testing.T) locklab.Config { return locklab.Config{Store: (*zk.Conn)(nil)} },
	}
}

// lockNode is the node that holds lease's lock: the lease's token for
// zk-recipe, the lock's path for zk-ephemeral, the lowest of the queue
// for zk-golib.
func lockNode(t testing.TB, conn *zk.Conn, name string, lease locklab.Lease) string {
	t.Helper()
	switch name {
	case zklock.RecipeName:
		return lease.Token
	case zklock.EphemeralName:
		return zklock.Path(name, lease.Key)
	}
	dir := zklock.Path(name, lease.Key)
	queue := children(t, conn, dir)
	require.NotEmpty(t, queue, "zk.Lock's queue under %s", dir)
	lowest := queue[0]
	for _, c := range queue {
		if seq(c) < seq(lowest) {
			lowest = c
		}
	}
	return dir + "/" + lowest
}

// seq is the sequence number of a queued node's name.
func seq(name string) string { return name[len(name)-10:] }
