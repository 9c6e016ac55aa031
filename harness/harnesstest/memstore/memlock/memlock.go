// Package memlock is the strategy family "memstore": the locks of
// harness/harnesstest/memstore, a store made for the tests, each on a
// Client that sends one request of memstore's server and returns its
// answer. It registers its strategies from init, as a family of
// strategies/ does, imports neither the harness nor its store, and names
// its store's package (Description.StorePackage): a program that imports
// it without memstore has its strategies refused by the harness with the
// import it lacks.
//
//	mem-cas  ACQ to take the lock with a fence; REL, the server deleting it only for the holder's token
//	mem-del  ACQ as mem-cas; DEL, deleting the key whoever holds it: broken on purpose
package memlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/strategies"
)

// Family is the strategies' family: the name of the store they lock on.
const Family = "memstore"

// The family's strategies.
const (
	CAS = "mem-cas"
	Del = "mem-del"
)

// StorePackage is the package that registers the store with the harness.
const StorePackage = "github.com/locklab/locklab/harness/harnesstest/memstore"

// Client is what the family's locks take in Config.Store: a connection
// that sends one request of memstore's server (memstore.Server's
// protocol) and returns its answer. A *memstore.Conn is one; the harness
// gives its clients one whose every request is a step.
type Client interface {
	Do(ctx context.Context, words ...string) (string, error)
}

func init() {
	strategies.MustRegister(strategies.Description{
		Name:    CAS,
		Family:  Family,
		Summary: "ACQ key token ttl: the server takes the lock if nobody holds it, with the key's next fence; release REL key token, deleted only while the token holds",
		Source:  "locklab's own test store (harness/harnesstest/memstore), SET NX PX with a fence counter in one request",
		Weaknesses: []string{
			"a holder paused past its TTL keeps acting while a successor holds the lock: only a resource that checks the fence number is safe",
		},
		Properties:   strategies.Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true},
		Options:      []string{strategies.OptStore},
		StorePackage: StorePackage,
	}, newLock(false))
	strategies.MustRegister(strategies.Description{
		Name:    Del,
		Family:  Family,
		Summary: "ACQ as mem-cas; release DEL key, the key deleted whoever holds it",
		Source:  "locklab's own test store (harness/harnesstest/memstore), the release of SETNX's first recipes (DEL without an owner check)",
		Weaknesses: []string{
			"a holder whose TTL ran out releases its successor's lock: a third client takes it while the successor still holds it",
		},
		Properties:     strategies.Properties{AtomicAcquire: true, ServerTTL: true, Fencing: true},
		Options:        []string{strategies.OptStore},
		BrokenByDesign: "its release deletes the key whoever holds it, so a holder delayed past its TTL releases its successor's lock",
		StorePackage:   StorePackage,
	}, newLock(true))
}

// casLock is mem-cas on one server, or mem-del where del says so.
type casLock struct {
	c     Client
	clock locklab.Clock
	del   bool

	mu   sync.Mutex
	rand io.Reader
}

// newLock returns the factory of mem-cas, or of mem-del where del says
// so.
func newLock(del bool) strategies.Factory {
	name := CAS
	if del {
		name = Del
	}
	return func(cfg locklab.Config) (locklab.Locker, error) {
		c, ok := cfg.Store.(Client)
		if v := reflect.ValueOf(c); !ok || v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, lockkit.Invalid("%s takes a memlock.Client in Config.Store, not %T", name, cfg.Store)
		}
		l := &casLock{c: c, clock: cfg.Clock, del: del, rand: cfg.Rand}
		if l.clock == nil {
			l.clock = locklab.SystemClock
		}
		if l.rand == nil {
			l.rand = rand.Reader
		}
		return l, nil
	}
}

// LeaseClock is the Clock the leases' Until is read from.
func (l *casLock) LeaseClock() locklab.Clock { return l.clock }

// Acquire takes the lock in one request, or is refused.
func (l *casLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	if strings.ContainsAny(key, " \t\r\n") {
		return locklab.Lease{}, lockkit.Invalid("%s: a key has no spaces: %q", l.name(), key)
	}
	var b [8]byte
	l.mu.Lock()
	_, err := io.ReadFull(l.rand, b[:])
	l.mu.Unlock()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	token := hex.EncodeToString(b[:])
	start := l.clock.Now()
	ms := max(ttl.Milliseconds(), 1) // the server keeps whole milliseconds
	ans, err := l.c.Do(ctx, "ACQ", key, token, strconv.FormatInt(ms, 10))
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	if ans == "HELD" {
		return locklab.Lease{}, fmt.Errorf("%w: %q", locklab.ErrNotAcquired, key)
	}
	f, ok := strings.CutPrefix(ans, "OK ")
	fence, err := strconv.ParseInt(f, 10, 64)
	if !ok || err != nil {
		return locklab.Lease{}, lockkit.Unavailable(fmt.Errorf("%s: ACQ answered %q", l.name(), ans))
	}
	return locklab.Lease{Key: key, Token: token, Fence: fence, Until: start.Add(time.Duration(ms) * time.Millisecond)}, nil
}

// Release deletes the lock if the lease's token still holds it (REL);
// mem-del's deletes the key whoever holds it (DEL), and says nothing of a
// lock that was no longer there.
func (l *casLock) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	words := []string{"REL", lease.Key, lease.Token}
	if l.del {
		words = []string{"DEL", lease.Key}
	}
	ans, err := l.c.Do(ctx, words...)
	switch {
	case err != nil:
		return lockkit.Unavailable(err)
	case ans == "NOTHELD":
		return fmt.Errorf("%w: %q", locklab.ErrNotHeld, lease.Key)
	case ans != "OK":
		return lockkit.Unavailable(fmt.Errorf("%s: %s answered %q", l.name(), words[0], ans))
	}
	return nil
}

// name is the lock's strategy.
func (l *casLock) name() string {
	if l.del {
		return Del
	}
	return CAS
}
