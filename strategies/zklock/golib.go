package zklock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// GolibLock is the "zk-golib" strategy: the lock go-zookeeper/zk ships,
// zk.NewLock(conn, path, acl), used as its documentation says, with every
// one of its flaws. Its Lock is the recipe without re-entry:
//
//	create   <path>/_c_<guid>-lock-  ephemeral, sequential
//	         (CreateProtectedEphemeralSequential: after a lost answer it
//	         looks for the GUID, three tries at most)
//	loop     children <path>; lowest? held; else getData(predecessor,
//	         watch), wait for any event of it, loop
//	Unlock   delete(node)
//
// The path is Options.Root/zk-golib/<key escaped> (Path); zk.Lock creates
// its missing parents as persistent nodes, which stay. Each Acquire builds
// a zk.Lock of its own and keeps it for Release, which calls its Unlock.
// Lease.Token is a random token naming that zk.Lock here: a lease is
// released only through the GolibLock that took it (go-zookeeper's Unlock
// belongs to the zk.Lock that locked). Lease.Fence is 0: zk.Lock tells its
// caller neither its node nor any zxid, so there is no fence, and no
// Extend either.
//
// zk.Lock's Lock blocks until it holds the lock and takes no context.
// Acquire runs it in a goroutine and waits for it at most Options.Patience
// (DefaultPatience) and while ctx lasts; past either it gives up:
// ErrNotAcquired while the connection has its session (the Lock is
// waiting its turn behind a holder), wrapped with ErrUnavailable and
// ctx.Err() when ctx ended, ErrUnavailable when the connection has no
// session. The Lock it gave up on cannot be called back: its goroutine
// goes on, and its node stays in the lock's queue; when its turn comes
// the goroutine unlocks at once (one delete), so that the lock passes on,
// but every waiter queued behind it waits for that round trip too, and an
// Acquire retried by locklab.Wait queues one more node each time. Only its
// turn, an error of the connection, or the connection's Close ends such
// a goroutine. Lock (this type's) waits for zk.Lock with no patience,
// while ctx lasts, and gives up the same way.
//
// How it fails, beyond the pauses and partitions every lock here fails
// under (see the package documentation):
//
//   - It never learns of a lost lock (samuel/go-zookeeper#20: "Is there a
//     way to tell if a previously acquired lock has been lost?"): when the
//     session expires, the server deletes the node, go-zookeeper's
//     connection opens a new session on its own at its next connect, and
//     the zk.Lock still believes it holds the lock while the next waiter
//     holds it too. Only Release, whose delete finds no node, says so
//     (ErrNotHeld), once the work is done.
//   - A lost answer after the create deadlocks the lock
//     (samuel/go-zookeeper#229): when the connection drops while Lock
//     reads the children or watches its predecessor, Lock returns the
//     error without its node, which stays in the queue with the session
//     that the connection keeps alive: every later Lock, the same
//     client's included, waits behind a node nobody will delete until
//     the process ends.
//   - A create whose answer is lost three times running, or whose search
//     for its GUID fails, leaves a node behind the same way.
type GolibLock struct {
	base
	patience time.Duration

	mu    sync.Mutex
	locks map[string]*zk.Lock // by Lease.Token
}

// NewGolib builds a GolibLock on conn.
func NewGolib(conn *zk.Conn, opts Options) (*GolibLock, error) {
	b, err := newBase(conn, GolibName, opts)
	if err != nil {
		return nil, err
	}
	patience := opts.Patience
	if patience == 0 {
		patience = DefaultPatience
	}
	return &GolibLock{base: b, patience: patience, locks: map[string]*zk.Lock{}}, nil
}

// NewGolibFromConfig builds a GolibLock from cfg.Store (a *zk.Conn),
// cfg.Clock and cfg.Rand, refusing the rest with locklab.ErrInvalid.
func NewGolibFromConfig(cfg locklab.Config) (*GolibLock, error) {
	conn, opts, err := fromConfig(cfg, GolibName)
	if err != nil {
		return nil, err
	}
	return NewGolib(conn, opts)
}

// Path is the node under which zk.Lock queues the lock's nodes for key.
func (l *GolibLock) Path(key string) string { return l.path(key) }

// Acquire runs a new zk.Lock's Lock and waits for it at most the patience,
// and while ctx lasts (see GolibLock for what a Lock given up on does).
// It fails with ErrInvalid for an empty key or a ttl under 1ms, and with
// ErrUnavailable when zk.Lock fails.
func (l *GolibLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.lock(ctx, key, ttl, l.patience)
}

// Lock is Acquire without patience: it waits for zk.Lock's Lock while ctx
// lasts.
func (l *GolibLock) Lock(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.lock(ctx, key, ttl, 0)
}

func (l *GolibLock) lock(ctx context.Context, key string, ttl time.Duration, patience time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	tok, err := l.tokens.Token()
	if err != nil {
		return locklab.Lease{}, lockkit.Unavailable(err)
	}
	start := l.clock.Now()
	zl := zk.NewLock(l.conn, l.Path(key), l.acl)
	a := &attempt{done: make(chan error, 1)}
	go a.run(zl)
	var timeout <-chan time.Time
	if patience > 0 {
		t := time.NewTimer(patience)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err = <-a.done:
	case <-ctx.Done():
		finished, err := a.giveUp()
		if !finished {
			return locklab.Lease{}, l.gaveUp(ctx, key)
		}
		if err == nil {
			// Locked as ctx ended: hand it back rather than keep it.
			zl.Unlock()
		}
		return locklab.Lease{}, lockkit.Unavailable(ctx.Err())
	case <-timeout:
		var finished bool
		if finished, err = a.giveUp(); !finished {
			return locklab.Lease{}, l.gaveUp(ctx, key)
		}
	}
	if err != nil {
		return locklab.Lease{}, unavailable(ctx, err)
	}
	l.mu.Lock()
	l.locks[tok] = zl
	l.mu.Unlock()
	return locklab.Lease{Key: key, Token: tok, Until: start.Add(ttl)}, nil
}

// gaveUp is the error of an Acquire that stopped waiting for its Lock.
func (l *GolibLock) gaveUp(ctx context.Context, key string) error {
	var err error = fmt.Errorf("%w (zk.Lock still waits in the queue)", single.NotAcquired(key))
	if l.conn.State() != zk.StateHasSession {
		err = lockkit.Unavailable(fmt.Errorf("zk.Lock waits for the connection (%v)", l.conn.State()))
	}
	if ctx.Err() != nil {
		return ended(ctx, err)
	}
	return err
}

// attempt is one zk.Lock's Lock, in its own goroutine.
type attempt struct {
	mu        sync.Mutex
	abandoned bool
	done      chan error // Lock's outcome, when not abandoned
}

// run calls Lock; when the Acquire gave up on it meanwhile, a lock it
// took is unlocked at once.
func (a *attempt) run(zl *zk.Lock) {
	err := zl.Lock()
	a.mu.Lock()
	abandoned := a.abandoned
	if !abandoned {
		a.done <- err
	}
	a.mu.Unlock()
	if abandoned && err == nil {
		zl.Unlock()
	}
}

// giveUp abandons the attempt, unless Lock has returned already: then it
// returns true and Lock's outcome.
func (a *attempt) giveUp() (finished bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case err := <-a.done:
		return true, err
	default:
		a.abandoned = true
		return false, nil
	}
}

// Release calls Unlock on the zk.Lock the lease's Acquire locked: one
// delete of its node. It fails with ErrNotHeld when that node is gone (its
// session expired: the first the holder hears of it), and when the lease
// is no lock of this GolibLock's, released already or taken by another
// (zk.ErrNotLocked).
func (l *GolibLock) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	l.mu.Lock()
	zl := l.locks[lease.Token]
	delete(l.locks, lease.Token)
	l.mu.Unlock()
	if zl == nil {
		return fmt.Errorf("%w (%v)", single.NotHeld(lease.Key), zk.ErrNotLocked)
	}
	err := zl.Unlock()
	switch {
	case err == nil:
		return nil
	case lost(err):
		return single.NotHeld(lease.Key)
	default:
		l.mu.Lock()
		l.locks[lease.Token] = zl // Unlock may be tried again
		l.mu.Unlock()
		return unavailable(ctx, err)
	}
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *GolibLock) LeaseClock() locklab.Clock { return l.clock }
