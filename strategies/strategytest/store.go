package strategytest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
)

// Store is what the suite needs of the store a strategy locks on, for a
// strategy of a store other than Redis (RunStore): its clients, how a lock
// lapses there, and what the suite inspects. Run builds the one of Redis
// servers from a Config.
type Store struct {
	// NewConfig returns a Config on the store for one Locker. Where the
	// store ties a lock to its client (a ZooKeeper session), each call
	// gives a client of its own, so that Expire ends one holder's hold
	// and no other's; cleanups go on t. It is called from several
	// goroutines at once.
	NewConfig func(t *testing.T) locklab.Config
	// RoundTrip makes one request of the store (every server of it, at
	// once) through cfg's client: the suite times rounds of it to derive
	// its short TTL.
	RoundTrip func(cfg locklab.Config) error
	// Expire makes lease, held by a Locker built on cfg, lapse as the
	// store lapses the lock of a holder that is gone: once it returns the
	// store must no longer hold the lock, as if its TTL had passed. A
	// ZooKeeper store ends the holder's session. Nil: the lock lapses at
	// its TTL, and the suite waits the TTL out.
	Expire func(t *testing.T, cfg locklab.Config, lease locklab.Lease)
	// Holds reports whether the store holds anything of the lock on key
	// (a key, a node, a row), reading through cfg's client.
	Holds func(t *testing.T, cfg locklab.Config, key string) bool
	// Expiry is how long the store itself keeps the lock lease holds if
	// its holder goes away (a key's TTL, a session's timeout), and false
	// when it keeps it for ever.
	Expiry func(t *testing.T, cfg locklab.Config, lease locklab.Lease) (time.Duration, bool)
	// Sent is the expiry the store is given for an Acquire's ttl, which
	// Lease.Until must not pass. Nil: ttl in whole milliseconds, rounded
	// down, as Redis takes it.
	Sent func(ttl time.Duration) time.Duration
	// Unreachable returns a Config whose client reaches no server: a
	// port nothing listens on.
	Unreachable func(t *testing.T) locklab.Config
	// NilClient returns a Config that names the store's client as a typed
	// nil, which New must refuse with locklab.ErrInvalid.
	NilClient func(t *testing.T) locklab.Config
}

// RunStore runs the suite for the strategy registered as name, on the
// store st describes; the strategies of stores other than Redis run it so.
// Keys are unique per sub-test, and the sub-tests run in parallel.
func RunStore(t *testing.T, name string, st Store) {
	require.NotNil(t, st.NewConfig, "Store.NewConfig")
	require.NotNil(t, st.RoundTrip, "Store.RoundTrip")
	require.NotNil(t, st.Holds, "Store.Holds")
	require.NotNil(t, st.Expiry, "Store.Expiry")
	require.NotNil(t, st.Unreachable, "Store.Unreachable")
	require.NotNil(t, st.NilClient, "Store.NilClient")
	if st.Sent == nil {
		st.Sent = func(ttl time.Duration) time.Duration { return ttl.Truncate(time.Millisecond) }
	}
	run(t, name, st)
}
