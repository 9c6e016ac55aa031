// Package etcdlock holds the lock etcd offers as its own recipe, in its Go
// client's concurrency package: a session holds a lease, and a Mutex puts
// a key under the lock's prefix, attached to that lease; the key with the
// lowest create revision under the prefix holds the lock, and the others
// wait for the deletion of their predecessor. etcdctl lock and etcd's
// v3lock service run the same algorithm. Importing the package registers
// it (family "etcd"):
//
//   - LeaseLock ("etcd-lease"): one attempt of concurrency.Mutex (TryLock) on
//     a session whose lease has the lock's TTL; Lease.Fence is the lock
//     key's create revision; release deletes the key and revokes the
//     lease.
//   - MutexLock ("etcd-mutex"): concurrency.Mutex.Lock, as etcd's users
//     call it, on one Session per process kept alive by the client's
//     keepalive: a waiter watches the key before its own; Lease.Fence is
//     the key's create revision; release is Mutex.Unlock, a blind delete.
//
// etcd's Session renews its lease for as long as its process runs; for
// etcd-lease that is Config.Watchdog (Options.KeepAlive), and etcd-mutex
// always runs it. Without it an etcd-lease lock's lease lives its TTL, as
// a Redis lock's key does, unless Extend renews it.
//
// A program picks it by name, as any other strategy:
//
//	import _ "github.com/locklab/locklab/strategies/etcdlock"
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"}})
//	lock, err := strategies.New("etcd-lease", locklab.Config{Store: cli})
//
// It takes a *clientv3.Client in Config.Store and refuses anything else,
// and Config.Pool and Config.Nodes, with locklab.ErrInvalid; New builds it
// from a client directly. The client is the caller's: its endpoints, TLS,
// credentials and logger are the caller's choice, and the lock never
// closes it. docs/library.md shows a whole program (the package's Example).
//
// # Closing
//
// locklab.Close(l), which calls LeaseLock.Close, stops the lease
// keepalives of Config.Watchdog (Options.KeepAlive), the only thing a
// LeaseLock runs between calls: the locks it still holds then expire at
// their TTL. It releases nothing, and does not close the client: close
// the client after every LeaseLock built on it.
//
// # The client's log lines
//
// The lines that may appear on stderr, JSON objects with
// "logger":"etcd-client", come from the etcd client, not from this
// package, which logs nothing. The client logs through the zap logger of
// clientv3.Config.Logger; when that is nil it builds one of its own that
// writes info and above to stderr (the environment variable
// ETCD_CLIENT_DEBUG=error raises that default's level). Its retry interceptor warns of every
// request the server refuses, and a Release that finds the lock gone
// revokes a lease that no longer exists: a second Release of a lease, or
// one after the lease expired, returns ErrNotHeld and the client also
// prints
//
//	{"level":"warn","logger":"etcd-client","msg":"retrying of unary invoker failed","method":"/etcdserverpb.Lease/LeaseRevoke","error":"rpc error: code = NotFound desc = etcdserver: requested lease not found",...}
//
// The returned error is the outcome; the line is noise. The logger is the
// client's owner's to choose: zap.NewNop() in clientv3.Config.Logger
// silences the client, and the program's own *zap.Logger (with a level of
// zap.ErrorLevel, say, through zap.IncreaseLevel) sends its lines with the
// program's.
//
// # Why it is here, and how it fails
//
// etcd replicates the lock key through raft, so unlike a Redis lock it
// survives the loss of any minority of the cluster, the leader included:
// a new leader has every committed key, and when it takes over it renews
// every lease for its full TTL plus an election timeout. That is not
// mutual exclusion. Kyle Kingsbury's Jepsen analysis of etcd 3.4.3 (2020)
// found etcd's locks fundamentally unsafe, as every lease-based lock is in
// an asynchronous network: a holder that is paused (GC, a stopped VM) or
// cut off from the cluster past its lease's TTL loses the lock to the next
// client, but nothing stops it from going on with its work when it
// resumes, believing it still holds the lock, and two clients work at
// once. (The analysis also found a waiting lock that could return after
// its lease had expired; the client's Mutex.Lock now reads its key back
// before returning. TryLock, which this strategy uses, does not wait.)
// The remedy is fencing: the lock key's create revision (Lease.Fence)
// grows with every holder, and a resource that refuses writes carrying a
// revision smaller than one it has seen refuses the stale holder.
//
// # TTLs
//
// etcd leases have whole seconds: a TTL under 1s is refused with
// locklab.ErrInvalid (rounded up, an 80ms lock would last 1s, twelve
// times what was asked, and a caller waiting for it to free would be
// wrong by as much); a longer one is rounded up to whole seconds (1.5s
// gives a 2s lease). Lease.Until is the start plus the TTL asked for, so
// the holder stops first. The server also raises a TTL below one and a
// half election timeouts to that, rounded up to seconds: 2s with etcd's
// default 1s election timeout.
//
// Extend (locklab.Extend) renews the lease to the TTL it was granted with,
// which etcd cannot change: asking more of a lock than its Acquire's TTL
// gives that TTL, without an error, and the returned Lease.Until says so.
// Read Until, not the ttl asked for.
package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// Family is the family of the strategies of this package.
const Family = "etcd"

// Name is the registered name of LeaseLock.
const Name = "etcd-lease"

// DefaultTimeout bounds each call when Options.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// Options configure a LeaseLock beyond its client.
type Options struct {
	// KeepAlive keeps every held lock's lease alive, as a
	// concurrency.Session does by default (etcdctl lock too): the client
	// renews it every third of its TTL until Release, Close or the loss of
	// the lease. Without it the lease lives its TTL unless Extend renews
	// it. Config.Watchdog sets it.
	KeepAlive bool
	// Timeout bounds each Acquire, Release and Extend beside their
	// context, as a Redis pool's read timeout bounds each command: the
	// client waits for a connection to a member for as long as its
	// context allows. Default DefaultTimeout.
	Timeout time.Duration
	// Clock is read for Lease.Until. Default locklab.SystemClock.
	Clock locklab.Clock
}

// LeaseLock is the "etcd-lease" strategy, etcd's own lock recipe through
// go.etcd.io/etcd/client/v3/concurrency:
//
//	lease := Grant(ceil(ttl))                                  // the session's lease
//	key   := <prefix>/<lease id in hex>                        // concurrency.Mutex's key
//	Txn If(CreateRevision(key) = 0)
//	    Then(Put(key, "", lease), Get(<prefix>/, first by create revision))
//	// the lock is held when the first key is ours; else TryLock deletes
//	// ours and the acquire is refused
//	// release
//	Txn If(CreateRevision(key) = fence) Then(Delete(key)); Revoke(lease)
//
// The prefix is the lock's key with '%' and '/' escaped (%25, %2F), so that
// no lock's prefix holds the keys of another: with the key as given, as
// etcd's recipe takes it, the lock "a" would count the holders of "a/b"
// as its own. Lease.Key is the key given to Acquire, Lease.Token the etcd
// key the lock holds, and Lease.Fence that key's create revision: etcd's
// revisions grow with every write to the cluster, so fences grow across
// holders of every lock. A locklab.Lease value is all Release and Extend need:
// any LeaseLock on the same cluster can release it.
//
// Each acquire is one attempt: a client that waits (locklab.Wait) polls,
// where concurrency.Mutex.Lock would queue behind its predecessor with a
// watch. See the package documentation for how it fails.
type LeaseLock struct {
	client    *clientv3.Client
	clock     locklab.Clock
	timeout   time.Duration
	keepAlive bool

	mu       sync.Mutex
	sessions map[string]*concurrency.Session // by Lease.Token, with KeepAlive
}

var _ locklab.Extender = (*LeaseLock)(nil)

// New builds a LeaseLock on client.
func New(client *clientv3.Client, opts Options) (*LeaseLock, error) {
	if client == nil {
		return nil, lockkit.Invalid("%s: nil *clientv3.Client", Name)
	}
	if opts.Timeout < 0 {
		return nil, lockkit.Invalid("%s: negative timeout %v", Name, opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Clock == nil {
		opts.Clock = locklab.SystemClock
	}
	return &LeaseLock{client: client, clock: opts.Clock, timeout: opts.Timeout, keepAlive: opts.KeepAlive,
		sessions: map[string]*concurrency.Session{}}, nil
}

// NewFromConfig builds a LeaseLock from cfg.Store (a *clientv3.Client),
// cfg.Clock and cfg.Watchdog (Options.KeepAlive). It refuses Config.Pool,
// Config.Nodes and the options it does not read with locklab.ErrInvalid.
func NewFromConfig(cfg locklab.Config) (*LeaseLock, error) {
	if err := cfg.OnlyOptions(Name, locklab.OptStore, locklab.OptWatchdog); err != nil {
		return nil, err
	}
	if cfg.Pool != nil || cfg.Nodes != nil {
		return nil, lockkit.Invalid("strategy %s reads Config.Store (a *clientv3.Client), not Config.Pool or Config.Nodes", Name)
	}
	client, ok := cfg.Store.(*clientv3.Client)
	if !ok || client == nil {
		return nil, lockkit.Invalid("Config.Store is %T: strategy %s needs a non-nil *clientv3.Client", cfg.Store, Name)
	}
	return New(client, Options{KeepAlive: cfg.Watchdog, Clock: cfg.Clock})
}

// LeaseSeconds is the lease TTL, in etcd's whole seconds, that a lock of
// ttl gets: ttl rounded up. A ttl under 1s is refused with ErrInvalid.
func LeaseSeconds(ttl time.Duration) (int64, error) {
	if ttl < time.Second {
		return 0, lockkit.Invalid("%s: ttl %v is under etcd's lease granularity of 1s", Name, ttl)
	}
	secs := int64(ttl / time.Second)
	if ttl%time.Second != 0 {
		secs++
	}
	if secs > maxLeaseSeconds {
		return 0, lockkit.Invalid("%s: ttl %v is over etcd's longest lease, %ds", Name, ttl, maxLeaseSeconds)
	}
	return secs, nil
}

// maxLeaseSeconds is the longest lease etcd grants (its MaxLeaseTTL).
const maxLeaseSeconds = 9_000_000_000

// Prefix is the etcd prefix of the lock on key, without the trailing '/'
// that concurrency.Mutex adds: key with '%' and '/' escaped.
func Prefix(key string) string { return escaper.Replace(key) }

var escaper = strings.NewReplacer("%", "%25", "/", "%2F")

// bound applies the call timeout to ctx.
func (l *LeaseLock) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.timeout)
}

// Acquire makes one attempt: it grants a lease of ttl (rounded up to
// seconds), and tries concurrency.Mutex on it. It fails with ErrNotAcquired
// when another lease holds the lock, with ErrUnavailable when etcd could
// not answer in time, and with ErrInvalid for an empty key or a ttl under
// 1s. A failed attempt revokes its lease, and so the key it may have put,
// while ctx and the call timeout last; past them the lease, and the key,
// expire at the TTL.
func (l *LeaseLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	secs, err := LeaseSeconds(ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	cctx, cancel := l.bound(ctx)
	defer cancel()
	start := l.clock.Now()
	grant, err := l.client.Grant(cctx, secs)
	if err != nil {
		return locklab.Lease{}, unavailable(ctx, err)
	}
	// The session's keepalive must outlive this call: its context is
	// detached from ctx, and Orphan or Close ends it.
	sess, err := concurrency.NewSession(l.client, concurrency.WithLease(grant.ID),
		concurrency.WithTTL(int(secs)), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		l.revoke(cctx, grant.ID)
		return locklab.Lease{}, unavailable(ctx, err)
	}
	if !l.keepAlive {
		sess.Orphan()
	}
	m := concurrency.NewMutex(sess, Prefix(key))
	if err := m.TryLock(cctx); err != nil {
		sess.Orphan()
		l.revoke(cctx, grant.ID)
		if errors.Is(err, concurrency.ErrLocked) {
			return locklab.Lease{}, single.NotAcquired(key)
		}
		return locklab.Lease{}, unavailable(ctx, err)
	}
	owner := m.IsOwner() // CreateRevision(key) = the revision of our put
	lease := locklab.Lease{Key: key, Token: m.Key(), Fence: owner.GetCompare().GetCreateRevision(), Until: start.Add(ttl)}
	if l.keepAlive {
		l.mu.Lock()
		l.sessions[lease.Token] = sess
		l.mu.Unlock()
	}
	return lease, nil
}

// revoke revokes id while ctx lasts, ignoring the outcome: a lease left
// behind expires at its TTL, and the key it carries with it.
func (l *LeaseLock) revoke(ctx context.Context, id clientv3.LeaseID) {
	if ctx.Err() == nil {
		l.client.Revoke(ctx, id)
	}
}

// leaseID reads the lease id from lease's Token, which must be a key of
// the lock on lease.Key.
func leaseID(lease locklab.Lease) (clientv3.LeaseID, error) {
	hex, ok := strings.CutPrefix(lease.Token, Prefix(lease.Key)+"/")
	id, err := strconv.ParseInt(hex, 16, 64)
	if !ok || err != nil || id <= 0 || lease.Fence <= 0 {
		return 0, lockkit.Invalid("%s: lease token %q with fence %d is no lock key of %q", Name, lease.Token, lease.Fence, lease.Key)
	}
	return clientv3.LeaseID(id), nil
}

// stopKeepAlive ends the keepalive of the lease with token, if one runs.
func (l *LeaseLock) stopKeepAlive(token string) {
	l.mu.Lock()
	sess := l.sessions[token]
	delete(l.sessions, token)
	l.mu.Unlock()
	if sess != nil {
		sess.Orphan()
	}
}

// Release deletes the lock key if it is still the one lease put (its
// create revision is lease.Fence), then revokes the lease. It fails with
// ErrNotHeld, deleting nothing, when the key is gone: the lease expired
// (and a successor may hold the lock) or the lock was released already.
// Any keepalive of the lease stops, whatever the outcome.
func (l *LeaseLock) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	id, err := leaseID(lease)
	if err != nil {
		return err
	}
	l.stopKeepAlive(lease.Token)
	cctx, cancel := l.bound(ctx)
	defer cancel()
	resp, err := l.client.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(lease.Token), "=", lease.Fence)).
		Then(clientv3.OpDelete(lease.Token)).
		Commit()
	if err != nil {
		return unavailable(ctx, err)
	}
	l.revoke(cctx, id)
	if !resp.Succeeded {
		return single.NotHeld(lease.Key)
	}
	return nil
}

// Extend renews lease's etcd lease (KeepAliveOnce) and checks that the
// lock key is still there. etcd renews a lease to the TTL it was granted
// with and cannot change it: the returned Until is the start of the call
// plus the smaller of ttl and that TTL, never later than the lease's new
// expiry on the server. It fails with ErrNotHeld when the lease
// has expired or the key is gone, and never re-creates the lock.
func (l *LeaseLock) Extend(ctx context.Context, lease locklab.Lease, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, lease.Key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	if _, err := LeaseSeconds(ttl); err != nil {
		return locklab.Lease{}, err
	}
	id, err := leaseID(lease)
	if err != nil {
		return locklab.Lease{}, err
	}
	cctx, cancel := l.bound(ctx)
	defer cancel()
	start := l.clock.Now()
	ka, err := l.client.KeepAliveOnce(cctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return locklab.Lease{}, single.NotHeld(lease.Key)
	}
	if err != nil {
		return locklab.Lease{}, unavailable(ctx, err)
	}
	resp, err := l.client.Get(cctx, lease.Token)
	if err != nil {
		return locklab.Lease{}, unavailable(ctx, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != lease.Fence {
		return locklab.Lease{}, single.NotHeld(lease.Key)
	}
	lease.Until = start.Add(min(ttl, time.Duration(ka.TTL)*time.Second))
	return lease, nil
}

// Close stops every keepalive this LeaseLock runs (Options.KeepAlive), as the
// holder's process ending would: the locks then expire at their TTL. It
// does not release them, nor close the client. locklab.Close calls it.
func (l *LeaseLock) Close() error {
	l.mu.Lock()
	sessions := l.sessions
	l.sessions = map[string]*concurrency.Session{}
	l.mu.Unlock()
	for _, s := range sessions {
		s.Orphan()
	}
	return nil
}

// unavailable wraps err, a failure to reach etcd or a request it failed,
// in ErrUnavailable; when ctx has ended, ctx.Err() is wrapped too.
func unavailable(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w (%v)", locklab.ErrUnavailable, cerr, err)
	}
	return lockkit.Unavailable(err)
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *LeaseLock) LeaseClock() locklab.Clock { return l.clock }
