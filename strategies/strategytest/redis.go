package strategytest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// redisStore is the Store of the Redis servers newConfig's Configs reach
// (Pool, or Nodes for a multi-node strategy): the suite inspects the
// first, and a lock lapses at its TTL.
func redisStore(newConfig func() locklab.Config, d strategies.Description) Store {
	return Store{
		NewConfig: func(*testing.T) locklab.Config { return newConfig() },
		RoundTrip: pingAll,
		Holds: func(t *testing.T, cfg locklab.Config, key string) bool {
			n, err := redis.Int64(do(t, firstNode(cfg), "EXISTS", key), nil)
			require.NoError(t, err)
			return n > 0
		},
		Expiry: func(t *testing.T, cfg locklab.Config, lease locklab.Lease) (time.Duration, bool) {
			pttl, err := redis.Int64(do(t, firstNode(cfg), "PTTL", lease.Key), nil)
			require.NoError(t, err)
			require.NotEqual(t, int64(-2), pttl, "the lock key %q exists", lease.Key)
			return time.Duration(pttl) * time.Millisecond, pttl >= 0
		},
		Sent: func(ttl time.Duration) time.Duration { return ttl.Truncate(time.Millisecond) },
		Unreachable: func(t *testing.T) locklab.Config {
			cfg := newConfig()
			if d.Properties.MultiNode {
				nodes := make([]locklab.ConnSource, len(cfg.Nodes))
				for i := range nodes {
					nodes[i] = deadPool(t)
				}
				cfg.Nodes = nodes
			} else {
				cfg.Pool = deadPool(t)
			}
			return cfg
		},
		NilClient: func(*testing.T) locklab.Config {
			// A typed nil pool is no connection source either: refused at
			// New, not a panic at the first Acquire.
			var nilPool *redis.Pool
			cfg := locklab.Config{Pool: nilPool}
			if d.Properties.MultiNode {
				cfg = newConfig()
				cfg.Nodes = append([]locklab.ConnSource{nilPool}, cfg.Nodes[1:]...)
			}
			return cfg
		},
	}
}

// pingAll sends PING to every server of cfg at once, and returns when
// each has answered.
func pingAll(cfg locklab.Config) error {
	srcs := cfg.Nodes
	if cfg.Pool != nil {
		srcs = []locklab.ConnSource{cfg.Pool}
	}
	var wg sync.WaitGroup
	for _, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := src.GetContext(context.Background())
			if err != nil {
				return
			}
			c.Do("PING")
			c.Close()
		}()
	}
	wg.Wait()
	return nil
}

// firstNode is where the suite inspects keys.
func firstNode(cfg locklab.Config) locklab.ConnSource {
	if cfg.Pool != nil {
		return cfg.Pool
	}
	return cfg.Nodes[0]
}

func do(t *testing.T, src locklab.ConnSource, cmd string, args ...any) any {
	t.Helper()
	c, err := src.GetContext(context.Background())
	require.NoError(t, err)
	defer c.Close()
	v, err := c.Do(cmd, args...)
	require.NoError(t, err)
	return v
}

// deadPool is a pool whose server does not exist: a port nothing listens on.
func deadPool(t *testing.T) *redis.Pool {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	p := locklab.NewPool(addr)
	t.Cleanup(func() { p.Close() })
	return p
}
