// mem-cas: the strategy family "memstore", on a memstore server.

package memstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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

// Name is the store, and the family of its strategy.
const Name = "memstore"

// Strategy is the one strategy of the family.
const Strategy = "mem-cas"

// Client is what mem-cas takes in Config.Store: a connection that sends
// one request (Server's protocol) and returns its answer. A *Conn is one;
// the harness gives its clients one whose every request is a step.
type Client interface {
	Do(ctx context.Context, words ...string) (string, error)
}

func init() {
	strategies.MustRegister(strategies.Description{
		Name:    Strategy,
		Family:  Name,
		Summary: "ACQ key token ttl: the server takes the lock if nobody holds it, with the key's next fence; release REL key token, deleted only while the token holds",
		Source:  "locklab's own test store (harness/harnesstest/memstore), SET NX PX with a fence counter in one request",
		Weaknesses: []string{
			"a holder paused past its TTL keeps acting while a successor holds the lock: only a resource that checks the fence number is safe",
		},
		Properties: strategies.Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true},
		Options:    []string{strategies.OptStore},
	}, newLock)
}

// casLock is mem-cas on one server.
type casLock struct {
	c     Client
	clock locklab.Clock

	mu   sync.Mutex
	rand io.Reader
}

func newLock(cfg locklab.Config) (locklab.Locker, error) {
	c, ok := cfg.Store.(Client)
	if v := reflect.ValueOf(c); !ok || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, lockkit.Invalid("mem-cas takes a memstore.Client in Config.Store, not %T", cfg.Store)
	}
	l := &casLock{c: c, clock: cfg.Clock, rand: cfg.Rand}
	if l.clock == nil {
		l.clock = locklab.SystemClock
	}
	if l.rand == nil {
		l.rand = rand.Reader
	}
	return l, nil
}

// LeaseClock is the Clock the leases' Until is read from.
func (l *casLock) LeaseClock() locklab.Clock { return l.clock }

// Acquire takes the lock in one request, or is refused.
func (l *casLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	if strings.ContainsAny(key, " \t\r\n") {
		return locklab.Lease{}, lockkit.Invalid("mem-cas: a key has no spaces: %q", key)
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
		return locklab.Lease{}, lockkit.Unavailable(fmt.Errorf("mem-cas: ACQ answered %q", ans))
	}
	return locklab.Lease{Key: key, Token: token, Fence: fence, Until: start.Add(time.Duration(ms) * time.Millisecond)}, nil
}

// Release deletes the lock if the lease's token still holds it.
func (l *casLock) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	ans, err := l.c.Do(ctx, "REL", lease.Key, lease.Token)
	switch {
	case err != nil:
		return lockkit.Unavailable(err)
	case ans == "NOTHELD":
		return fmt.Errorf("%w: %q", locklab.ErrNotHeld, lease.Key)
	case ans != "OK":
		return lockkit.Unavailable(errors.New("mem-cas: REL answered " + strconv.Quote(ans)))
	}
	return nil
}
