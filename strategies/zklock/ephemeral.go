package zklock

import (
	"context"
	"errors"
	"path"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// EphemeralLock is the "zk-ephemeral" strategy, the lock many blog posts
// teach, and the "simple lock" of the ZooKeeper paper (Hunt, Konar,
// Junqueira and Reed, "ZooKeeper: Wait-free coordination for
// Internet-scale systems", USENIX ATC 2010, section 2.4):
//
//	create  <path>  ephemeral           // NodeExists: refused
//	exists  <path>  for its czxid, the fence
//	wait    exists(<path>, watch), then create again   // Lock only
//	release exists(<path>): its czxid must be the fence; delete(<path>, version)
//
// The path is Options.Root/zk-ephemeral/<key escaped> (Path), its
// parents made of containers where missing. Lease.Fence is the node's
// czxid, and Lease.Token the path with it.
//
// Its waiters all watch the one node: a release wakes every one of them
// (the paper's "herd effect", which the recipe's queue of sequential
// nodes avoids), each sends a create that all but one lose, and each loser
// sets its watch again, so that a release costs requests in proportion to
// the waiters. Its create is not protected: when the answer to a create
// is lost with the connection, the node may exist, held by the
// connection's session, which the client never learns (ZOOKEEPER-1262's
// failure, unmended): the attempt fails as unavailable and every later
// attempt, its own included, is refused until the session ends. Its
// release checks the node's czxid and then deletes by version: a holder
// paused for its session's timeout between the two requests finds, when
// it resumes, a successor's node with the same version, and deletes it.
type EphemeralLock struct {
	base
	// between, when set (by the tests), runs between a release's two
	// requests: where a pause opens the gap.
	between func()
}

var _ locklab.Extender = (*EphemeralLock)(nil)

// NewEphemeral builds an EphemeralLock on conn.
func NewEphemeral(conn *zk.Conn, opts Options) (*EphemeralLock, error) {
	b, err := newBase(conn, EphemeralName, opts)
	if err != nil {
		return nil, err
	}
	return &EphemeralLock{base: b}, nil
}

// NewEphemeralFromConfig builds an EphemeralLock from cfg.Store (a
// *zk.Conn) and cfg.Clock, refusing the rest with locklab.ErrInvalid.
func NewEphemeralFromConfig(cfg locklab.Config) (*EphemeralLock, error) {
	conn, opts, err := fromConfig(cfg, EphemeralName)
	if err != nil {
		return nil, err
	}
	return NewEphemeral(conn, opts)
}

// Path is the lock's node for key.
func (l *EphemeralLock) Path(key string) string { return l.path(key) }

// Acquire makes one attempt: it creates the lock's node and reads its
// czxid, and fails with ErrNotAcquired when the node exists, with
// ErrUnavailable when ZooKeeper could not answer, and with ErrInvalid for
// an empty key or a ttl under 1ms.
func (l *EphemeralLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	return l.try(ctx, key, ttl)
}

// Lock waits until it holds the lock: after each refusal it watches the
// lock's node with exists() and tries again once the node is deleted, as
// every other waiter does. When ctx ends first the error wraps
// ErrNotAcquired, ErrUnavailable and ctx.Err().
func (l *EphemeralLock) Lock(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	node := l.Path(key)
	for {
		lease, err := l.try(ctx, key, ttl)
		if !errors.Is(err, locklab.ErrNotAcquired) {
			return lease, err
		}
		if ctx.Err() != nil {
			return locklab.Lease{}, ended(ctx, err)
		}
		ok, _, ch, werr := l.conn.ExistsW(node)
		if werr != nil {
			return locklab.Lease{}, unavailable(ctx, werr)
		}
		if !ok {
			continue // released meanwhile
		}
		select {
		case ev := <-ch:
			if ev.Err != nil && !errors.Is(ev.Err, zk.ErrSessionExpired) {
				return locklab.Lease{}, unavailable(ctx, ev.Err)
			}
		case <-ctx.Done():
			return locklab.Lease{}, ended(ctx, err)
		}
	}
}

// try creates the node and reads its czxid.
func (l *EphemeralLock) try(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	node := l.Path(key)
	start := l.clock.Now()
	for attempt := 1; ; attempt++ {
		if err := begin(ctx); err != nil {
			return locklab.Lease{}, err
		}
		_, err := l.conn.Create(node, nil, zk.FlagEphemeral, l.acl)
		if err == nil {
			break
		}
		switch {
		case errors.Is(err, zk.ErrNodeExists):
			return locklab.Lease{}, single.NotAcquired(key)
		case errors.Is(err, zk.ErrNoNode) && attempt == 1:
			if perr := l.ensureParents(path.Dir(node)); perr != nil {
				return locklab.Lease{}, unavailable(ctx, perr)
			}
		default:
			// A lost answer included: the node may be there, the
			// session's, and nobody looks for it.
			return locklab.Lease{}, unavailable(ctx, err)
		}
	}
	if err := begin(ctx); err != nil {
		return locklab.Lease{}, err
	}
	ok, stat, err := l.conn.Exists(node)
	switch {
	case err != nil:
		return locklab.Lease{}, unavailable(ctx, err)
	case !ok:
		// Gone with its session already.
		return locklab.Lease{}, lockkit.Retryable(unavailable(ctx, errors.New("zk-ephemeral: the lock node vanished after its create")))
	case stat.EphemeralOwner != l.conn.SessionID():
		// Our session expired, and another client's create came first.
		return locklab.Lease{}, single.NotAcquired(key)
	}
	return locklab.Lease{Key: key, Token: token(node, stat.Czxid), Fence: stat.Czxid, Until: start.Add(ttl)}, nil
}

// token is the Lease.Token of the hold of node created by czxid.
func token(node string, czxid int64) string { return node + "#" + strconv.FormatInt(czxid, 10) }

// checkToken refuses a lease that names no hold of the lock on its key.
func (l *EphemeralLock) checkToken(lease locklab.Lease) error {
	if lease.Fence <= 0 || lease.Token != token(l.Path(lease.Key), lease.Fence) {
		return lockkit.Invalid("%s: lease token %q with fence %d is no hold of the lock on %q", EphemeralName, lease.Token, lease.Fence, lease.Key)
	}
	return nil
}

// Release reads the node and deletes it, at the version read, when its
// czxid is the lease's fence. It fails with ErrNotHeld, deleting nothing,
// when the node is gone or another hold's.
func (l *EphemeralLock) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	if err := l.checkToken(lease); err != nil {
		return err
	}
	node := l.Path(lease.Key)
	ok, stat, err := l.conn.Exists(node)
	switch {
	case lost(err):
		return single.NotHeld(lease.Key)
	case err != nil:
		return unavailable(ctx, err)
	case !ok || stat.Czxid != lease.Fence:
		return single.NotHeld(lease.Key)
	}
	if l.between != nil {
		l.between()
	}
	if err := begin(ctx); err != nil {
		return err
	}
	err = l.conn.Delete(node, stat.Version)
	switch {
	case err == nil:
		return nil
	case lost(err) || errors.Is(err, zk.ErrBadVersion):
		return single.NotHeld(lease.Key)
	default:
		return unavailable(ctx, err)
	}
}

// Extend checks that the node is still the lease's (its czxid is the
// fence) and owned by the connection's session, and returns the lease
// with Until the start of the call plus ttl. It fails with ErrNotHeld
// otherwise, and never creates the node.
func (l *EphemeralLock) Extend(ctx context.Context, lease locklab.Lease, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, lease.Key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	if err := l.checkToken(lease); err != nil {
		return locklab.Lease{}, err
	}
	start := l.clock.Now()
	if err := checkOwned(ctx, l.conn, l.Path(lease.Key), lease); err != nil {
		return locklab.Lease{}, err
	}
	lease.Until = start.Add(ttl)
	return lease, nil
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *EphemeralLock) LeaseClock() locklab.Clock { return l.clock }
