package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// MutexName is the registered name of MutexLock.
const MutexName = "etcd-mutex"

// DefaultPatience bounds how long MutexLock's Acquire waits in the queue
// when MutexOptions.Patience is 0.
const DefaultPatience = time.Second

// MutexOptions configure a MutexLock beyond its client.
type MutexOptions struct {
	// Patience bounds how long Acquire waits in the lock's queue before
	// it gives up with ErrNotAcquired (Lock waits while its context
	// lasts). Default DefaultPatience.
	Patience time.Duration
	// Timeout bounds the session's grant and each Release, beside their
	// context. Default DefaultTimeout.
	Timeout time.Duration
	// Clock is read for Lease.Until. Default locklab.SystemClock.
	Clock locklab.Clock
}

// MutexLock is the "etcd-mutex" strategy: etcd's blocking lock as its
// users call it, go.etcd.io/etcd/client/v3/concurrency (the recipe
// etcdctl lock and etcd's v3lock service run too):
//
//	s, _ := concurrency.NewSession(cli, concurrency.WithTTL(ttl)) // once: a lease, kept alive
//	m := concurrency.NewMutex(s, prefix)
//	m.Lock(ctx)   // Txn: put <prefix>/<lease> with the lease unless there,
//	              //      and read the first key by create revision;
//	              // not first: Get the last key created before ours,
//	              // Watch it until it is deleted, again until none is
//	              // left; then Get our own key: gone, ErrSessionExpired
//	...
//	m.Unlock(ctx) // Delete <prefix>/<lease>
//
// The session is the process's, as etcd's documentation has it ("a lease
// kept alive for the lifetime of a client"): the first Acquire with a TTL
// opens one with that TTL (rounded up to whole seconds), the client's
// keepalive renews its lease every third of it for as long as the process
// runs, and every later Acquire of the same TTL queues on it. Release is
// Mutex.Unlock, which deletes the key and leaves the session open for the
// next lock. A program closes its session when it ends (etcdctl lock does
// on exit), which revokes the lease; Close, which like every locklab.Close
// releases no lock, only stops the keepalive (Session.Orphan), and the
// lease runs out at its TTL, as a killed process's does.
// A session whose lease is gone (ErrSessionExpired, or a lease not found)
// is given up and the next Acquire opens another, as its users do when
// Done closes.
//
// Lease.Until is the start of the call plus the TTL when the call opened
// the session, else the end of the call plus two thirds of the TTL (the
// keepalive renews every third): the session's lease lasts at least that
// long while its keepalive runs. Mutex itself keeps no deadline: its users
// hold the lock until they unlock it, or until they notice Session.Done.
//
// Lease.Token is the lock key, and Lease.Fence its create revision
// (m.IsOwner's, the same as m.Header's revision when the lock was free):
// a user who wants a fence reads it there, for the Mutex itself checks
// nothing after Lock returns.
//
// How it fails:
//
//   - A holder paused (GC, a stopped VM) or cut off from the cluster past
//     its session's TTL loses its lease: the keepalive could not run or
//     reach the leader, the leader revokes the lease and deletes the key,
//     and the next waiter's watch fires and it holds the lock. The holder
//     resumes believing it holds the lock: Mutex gives it no sign unless
//     it watches the session's Done channel (which closes only when the
//     next keepalive is answered that the lease is gone) or hands the
//     key's create revision to a resource that checks it.
//   - Unlock deletes the key without a compare: after such a loss it
//     deletes nothing (the key went with the lease; the successor's key
//     has another lease in its name) and returns nil, so Release says
//     nothing of the loss either.
//   - A Txn whose reply is lost (the server put the key, the connection
//     dropped) fails Lock without a delete: the key stays under the
//     prefix on the session's lease, which the keepalive keeps. The
//     process's next Lock on the session finds its own key (the Txn's
//     else branch) and holds the lock; until then, or until the session
//     ends, every other client waits behind a key nobody will delete.
//   - A waiter whose own lease expires while it waits keeps waiting (its
//     watch is on its predecessor, not on its own key: the client's TODO
//     "early termination if the session key is deleted"); once its turn
//     comes, Lock reads its own key back and, finding it gone, returns
//     ErrSessionExpired, which Acquire returns as ErrNotAcquired. The
//     read was added after Jepsen's etcd 3.4.3 analysis, which saw Lock
//     return on a lease that had expired while it waited.
//
// Acquire waits for Lock at most Options.Patience and while ctx lasts;
// giving up cancels Lock's context, and Lock deletes its key on its way
// out, as it does for its users. Lock (this type's) waits while ctx
// lasts. There is no Extend: the session's keepalive is the renewal.
type MutexLock struct {
	client   *clientv3.Client
	clock    locklab.Clock
	patience time.Duration
	timeout  time.Duration

	mu       sync.Mutex
	sessions map[int64]*concurrency.Session // by TTL in seconds
	held     map[string]*concurrency.Mutex  // by Lease.Token
}

// NewMutex builds a MutexLock on client.
func NewMutex(client *clientv3.Client, opts MutexOptions) (*MutexLock, error) {
	if client == nil {
		return nil, lockkit.Invalid("%s: nil *clientv3.Client", MutexName)
	}
	if opts.Patience < 0 || opts.Timeout < 0 {
		return nil, lockkit.Invalid("%s: negative patience %v or timeout %v", MutexName, opts.Patience, opts.Timeout)
	}
	if opts.Patience == 0 {
		opts.Patience = DefaultPatience
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Clock == nil {
		opts.Clock = locklab.SystemClock
	}
	return &MutexLock{client: client, clock: opts.Clock, patience: opts.Patience, timeout: opts.Timeout,
		sessions: map[int64]*concurrency.Session{}, held: map[string]*concurrency.Mutex{}}, nil
}

// NewMutexFromConfig builds a MutexLock from cfg.Store (a
// *clientv3.Client) and cfg.Clock. It refuses Config.Pool, Config.Nodes
// and the options it does not read with locklab.ErrInvalid: the session's
// keepalive always runs, as it does for etcd's users.
func NewMutexFromConfig(cfg locklab.Config) (*MutexLock, error) {
	if err := cfg.OnlyOptions(MutexName, locklab.OptStore); err != nil {
		return nil, err
	}
	if cfg.Pool != nil || cfg.Nodes != nil {
		return nil, lockkit.Invalid("strategy %s reads Config.Store (a *clientv3.Client), not Config.Pool or Config.Nodes", MutexName)
	}
	client, ok := cfg.Store.(*clientv3.Client)
	if !ok || client == nil {
		return nil, lockkit.Invalid("Config.Store is %T: strategy %s needs a non-nil *clientv3.Client", cfg.Store, MutexName)
	}
	return NewMutex(client, MutexOptions{Clock: cfg.Clock})
}

// session returns the open session of secs seconds, opening it when there
// is none or the last one's keepalive has ended; fresh says it opened it.
func (l *MutexLock) session(ctx context.Context, secs int64) (s *concurrency.Session, fresh bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.sessions[secs]; s != nil {
		select {
		case <-s.Done():
			delete(l.sessions, secs)
		default:
			return s, false, nil
		}
	}
	// NewSession grants the lease on the client's own context, which no
	// call bounds: the grant here is the same request, bounded.
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	grant, err := l.client.Grant(cctx, secs)
	if err != nil {
		return nil, false, unavailable(ctx, err)
	}
	s, err = concurrency.NewSession(l.client, concurrency.WithLease(grant.ID), concurrency.WithTTL(int(secs)))
	if err != nil {
		return nil, false, unavailable(ctx, err)
	}
	l.sessions[secs] = s
	return s, true, nil
}

// dropSession gives up s, whose lease is gone: its keepalive stops, and
// the next Acquire opens another.
func (l *MutexLock) dropSession(secs int64, s *concurrency.Session) {
	l.mu.Lock()
	if l.sessions[secs] == s {
		delete(l.sessions, secs)
	}
	l.mu.Unlock()
	s.Orphan()
}

// Acquire waits in the lock's queue (Mutex.Lock) at most the patience,
// and while ctx lasts. It fails with ErrNotAcquired when the lock is still
// held then, or when the session's lease expired while it waited
// (concurrency.ErrSessionExpired); with ErrUnavailable when etcd could not
// answer; with ErrInvalid for an empty key or a ttl under 1s.
func (l *MutexLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.lock(ctx, key, ttl, l.patience)
}

// Lock is Acquire without patience: Mutex.Lock while ctx lasts, as etcd's
// users call it.
func (l *MutexLock) Lock(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.lock(ctx, key, ttl, 0)
}

func (l *MutexLock) lock(ctx context.Context, key string, ttl, patience time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	secs, err := LeaseSeconds(ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	start := l.clock.Now()
	s, fresh, err := l.session(ctx, secs)
	if err != nil {
		return locklab.Lease{}, err
	}
	m := concurrency.NewMutex(s, Prefix(key))
	lctx, cancel := ctx, context.CancelFunc(func() {})
	if patience > 0 {
		lctx, cancel = context.WithTimeout(ctx, patience)
	}
	defer cancel()
	err = m.Lock(lctx)
	switch {
	case err == nil:
	case errors.Is(err, concurrency.ErrSessionExpired):
		l.dropSession(secs, s)
		return locklab.Lease{}, fmt.Errorf("%w: %w", single.NotAcquired(key), err)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		l.dropSession(secs, s)
		return locklab.Lease{}, unavailable(ctx, err)
	case ctx.Err() == nil && lctx.Err() != nil:
		// Out of patience: Lock deleted its key on its way out.
		return locklab.Lease{}, fmt.Errorf("%w (waited %v in the queue)", single.NotAcquired(key), patience)
	default:
		return locklab.Lease{}, unavailable(ctx, err)
	}
	// The lease outlives a TTL from its grant and, while the keepalive
	// runs (every third of the TTL), two thirds of one from any moment.
	until := l.clock.Now().Add(ttl * 2 / 3)
	if fresh && start.Add(ttl).After(until) {
		until = start.Add(ttl)
	}
	lease := locklab.Lease{Key: key, Token: m.Key(), Fence: createRevision(m), Until: until}
	l.mu.Lock()
	l.held[lease.Token] = m
	l.mu.Unlock()
	return lease, nil
}

// Release is Mutex.Unlock: it deletes the lock key, whether or not it is
// still there, and keeps the session for the next lock. It returns nil
// for a lock lost to its lease's expiry (Unlock cannot tell), ErrNotHeld
// for a lease this MutexLock does not hold (released already, or taken by
// another), ErrUnavailable when etcd could not answer.
func (l *MutexLock) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	l.mu.Lock()
	m := l.held[lease.Token]
	delete(l.held, lease.Token)
	l.mu.Unlock()
	if m == nil {
		return fmt.Errorf("%w (%v)", single.NotHeld(lease.Key), concurrency.ErrLockReleased)
	}
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := m.Unlock(cctx); err != nil {
		l.mu.Lock()
		l.held[lease.Token] = m // Unlock may be tried again
		l.mu.Unlock()
		return unavailable(ctx, err)
	}
	return nil
}

// Close stops the keepalive of every session (Session.Orphan), as the
// holder's process ending would: the locks it still holds expire at their
// TTL. It releases nothing (a program that ends calls Session.Close, which
// also revokes the lease: locklab.Close releases no lock), and does not
// close the client. locklab.Close calls it.
func (l *MutexLock) Close() error {
	l.mu.Lock()
	sessions := l.sessions
	l.sessions = map[int64]*concurrency.Session{}
	clear(l.held)
	l.mu.Unlock()
	for _, s := range sessions {
		s.Orphan()
	}
	return nil
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock).
func (l *MutexLock) LeaseClock() locklab.Clock { return l.clock }

// createRevision is the create revision of m's key, which m compares in
// IsOwner: the lock's fence.
func createRevision(m *concurrency.Mutex) int64 {
	owner := m.IsOwner()
	return owner.GetCompare().GetCreateRevision()
}
