package locklab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/locklab/locklab/internal/lockerr"
)

// ConnSource hands out connections to one Redis server. A redigo *redis.Pool
// satisfies it. Strategies take a connection for each operation and close it
// when done; the harness supplies its own source to see every command.
type ConnSource interface {
	GetContext(ctx context.Context) (redis.Conn, error)
}

var _ ConnSource = (*redis.Pool)(nil)

// Clock is where strategies read the time. Timestamp locks write it into
// the store (a Redis value, a row's expiry column); every strategy uses it
// for Lease.Until. The harness gives each client a virtual clock.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock is the real wall clock (with its monotonic reading).
var SystemClock Clock = ClockFunc(time.Now)

// Config is what every strategy is built from. A strategy reads its store's
// client from one field: the Redis strategies on one server from Pool,
// the multi-node ones (Redlock) from Nodes, the strategies of the other
// stores from Store. Zero values of the other fields pick the documented
// defaults. What Config holds stays the caller's: no strategy closes it
// (see Close).
type Config struct {
	// Pool is the connection source of a single-node Redis strategy.
	Pool ConnSource
	// Nodes are the independent Redis masters of a multi-node strategy.
	Nodes []ConnSource
	// Clock is read for timestamps and validity deadlines. Default:
	// SystemClock.
	Clock Clock
	// Rand is where random tokens come from. Default: crypto/rand. The
	// harness passes a seeded source so runs replay exactly. Reads are
	// serialized, so a non-concurrent source such as *math/rand.Rand is fine.
	Rand io.Reader
	// DriftFactor is the clock drift allowance of Redlock as a fraction of
	// the TTL. Default 0.01. Only redlock reads it: the others refuse it
	// (OnlyOptions; strategies.New names the strategies that read it).
	DriftFactor float64
	// NodeTimeout bounds each node's answer in a multi-node acquire. Default:
	// a fiftieth of the TTL, at least 2ms and at most 50ms. Only redlock
	// reads it.
	NodeTimeout time.Duration
	// Notify makes strategies that support it (set-nx-px) publish each
	// release on ReleaseChannelPrefix + key, for a Notifier's waiters;
	// hash-reentrant always does and accepts it; the others refuse it.
	Notify bool
	// Watchdog makes strategies that support it (set-nx-px, hash-reentrant,
	// etcd-lease) keep each lock alive while its holder runs, as Redisson's
	// watch dog does: the first Acquire of a key starts a Watchdog that
	// extends it every TTL/3 until the last Release, the strategy's Close,
	// or the loss of the lock. The others refuse it.
	Watchdog bool
	// NoWatchdog turns off the watchdog of a strategy that runs one by
	// default (hash-reentrant, as Redisson's lock does when no lease time
	// is given): each lock then simply expires at its TTL, Redisson's
	// lock(leaseTime). The others refuse it; so does a strategy given
	// both Watchdog and NoWatchdog.
	NoWatchdog bool
	// Retry is the retry policy a strategy uses where the algorithm itself
	// retries (Redlock) and the default for Wait callers that want one.
	Retry RetryPolicy
	// Store is the client of a store other than Redis, for the strategies
	// of the families that lock there: a *clientv3.Client for etcd, a
	// *pgxpool.Pool for PostgreSQL, a *zk.Conn for ZooKeeper. Its type is
	// the family's own, so that this package imports no client but
	// redigo; each family's constructor says which type it takes and
	// refuses another. It is an option (OptStore) that only those
	// families read: Redis strategies refuse a Config that sets it.
	Store any
}

// The Config fields that only some strategies read, by name.
const (
	OptDriftFactor = "DriftFactor"
	OptNodeTimeout = "NodeTimeout"
	OptNotify      = "Notify"
	OptWatchdog    = "Watchdog"
	OptNoWatchdog  = "NoWatchdog"
	OptStore       = "Store"
)

// Options lists the fields of c that only some strategies read and c sets
// (OptDriftFactor, OptNodeTimeout, OptNotify, OptWatchdog, OptNoWatchdog,
// OptStore).
func (c Config) Options() []string {
	var out []string
	if c.DriftFactor != 0 {
		out = append(out, OptDriftFactor)
	}
	if c.NodeTimeout != 0 {
		out = append(out, OptNodeTimeout)
	}
	if c.Notify {
		out = append(out, OptNotify)
	}
	if c.Watchdog {
		out = append(out, OptWatchdog)
	}
	if c.NoWatchdog {
		out = append(out, OptNoWatchdog)
	}
	if c.Store != nil {
		out = append(out, OptStore)
	}
	return out
}

// OnlyOptions refuses, with ErrInvalid, a Config that sets a field only
// some strategies read (Options) that the strategy named strategy does not
// read: reads lists those it does. Every strategy's constructor calls it,
// so that an option is never ignored without a word.
func (c Config) OnlyOptions(strategy string, reads ...string) error {
	for _, opt := range c.Options() {
		if !slices.Contains(reads, opt) {
			return lockerr.Invalid("strategy %s does not read Config.%s", strategy, opt)
		}
	}
	return nil
}

// ClockOrDefault returns c.Clock, or SystemClock when it is nil.
func (c Config) ClockOrDefault() Clock {
	if c.Clock == nil {
		return SystemClock
	}
	return c.Clock
}

// Tokens returns a TokenSource drawing from c.Rand, or from crypto/rand when
// c.Rand is nil.
func (c Config) Tokens() *TokenSource {
	return &TokenSource{r: c.Rand}
}

// TokenSource makes unguessable lock tokens: 16 random bytes, hex encoded.
// It is safe for concurrent use.
type TokenSource struct {
	mu sync.Mutex
	r  io.Reader
}

// Token returns a fresh token. It fails only when the random source fails.
func (t *TokenSource) Token() (string, error) {
	var b [16]byte
	var err error
	if t.r == nil {
		_, err = rand.Read(b[:])
	} else {
		t.mu.Lock()
		_, err = io.ReadFull(t.r, b[:])
		t.mu.Unlock()
	}
	if err != nil {
		return "", err
	}
	var out [32]byte
	hex.Encode(out[:], b[:])
	return string(out[:]), nil
}
