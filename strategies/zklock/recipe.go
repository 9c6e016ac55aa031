package zklock

import (
	"context"
	"errors"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/strategies/reentrant"
)

// The names of zk-recipe's nodes: Curator's protected prefix "_c_", the
// attempt's GUID, a dash, then the lock name the server appends its
// sequence number to.
const (
	protectedPrefix = "_c_"
	lockName        = "lock-"
)

// createAttempts bounds the creates of one attempt whose answer was lost
// or that found the lock's path gone, as Curator's retry policy bounds
// them (ExponentialBackoffRetry's three retries, without the sleeps).
const createAttempts = 3

// errGone says that an attempt's node vanished from under it: its session
// expired. Curator's StandardLockInternalsDriver throws NoNodeException
// then, and LockInternals tries again from the create.
var errGone = errors.New("zk-recipe: the attempt's node is gone (its session expired)")

// RecipeLock is the "zk-recipe" strategy: the Locks recipe of ZooKeeper's
// documentation (recipes.html, "Locks") as Apache Curator's
// InterProcessMutex runs it (LockInternals, StandardLockInternalsDriver):
//
//	create   <path>/_c_<guid>-lock-  ephemeral, sequential      // protected
//	children <path>, sorted by sequence number
//	lowest?  hold it: exists(node) gives the fence, its czxid
//	else     Acquire: delete(node), refused   // Curator's acquire(0, ...)
//	         Lock: getData(predecessor, watch), wait, children again
//	release  delete(node)
//
// The path is Options.Root/zk-recipe/<key escaped> (Path), made of
// containers where missing (Curator's creatingParentContainersIfNeeded).
// The GUID is Curator's protection (withProtection), which the recipe as
// first written lacked (ZOOKEEPER-1262): when a create's answer is lost
// with the connection, the node may exist although the client never
// learned its name; the attempt looks for its GUID among the children and
// takes the node it finds, else creates again. A node whose fate stays
// unknown (the connection never came back within the attempt) is looked
// for again, and deleted, at the start of the next Acquire or Lock, where
// Curator deletes it in the background.
//
// Lease.Token is the node's path and Lease.Fence its czxid, which grows
// with every write to the ensemble. Acquire is one attempt, as Curator's
// acquire(0, unit); Lock waits in the queue until it holds the lock or ctx
// ends, watching only its predecessor, so that a release wakes one waiter.
// (Curator's zero wait also reads its predecessor, with a watch, before it
// notices that its time is up; Acquire leaves out that read, whose only
// effect is a watch left behind.)
//
// Re-entry is InterProcessMutex's, with the owner a context names
// (reentrant.WithOwner, as for hash-reentrant) in the place of Curator's
// thread: on one RecipeLock, an Acquire or Lock whose context names the
// owner of a hold of the same key enters it again and returns its lease
// with a new Until, asking nothing of the server; each Release leaves once,
// and only the last deletes the node. A context that names no owner is an
// owner of its own, which re-enters nothing, so that two goroutines
// exclude each other. Like Curator, a re-entry and a Release that leaves
// entries behind send no request: they succeed on a hold whose session has
// already expired, and the loss shows at the next Extend or at the last
// Release.
//
// Release deletes the node: ErrNotHeld when it is gone (its session
// expired, or it was released already), where Curator's release ignores
// the missing node. Extend checks that the node is still there, with the
// lease's czxid and the connection's session as its ephemeral owner, and
// sets Until; it fails with ErrNotHeld otherwise, and so does a Release or
// Extend after the session's expiry. A lease is released and extended
// through a RecipeLock on the connection that holds it.
type RecipeLock struct {
	base

	mu sync.Mutex
	// holds are the locks held, by node path (Lease.Token); owners the
	// node each owner holds, for re-entry.
	holds  map[string]*hold
	owners map[ownerKey]string
	// orphans are the paths, or protected prefixes, of nodes an attempt
	// may have left behind: a create whose answer was lost and whose node
	// was not found again, a delete that failed.
	orphans []string
}

type hold struct {
	key   string
	owner string
	fence int64
	count int
}

type ownerKey struct{ key, owner string }

var _ locklab.Extender = (*RecipeLock)(nil)

// NewRecipe builds a RecipeLock on conn.
func NewRecipe(conn *zk.Conn, opts Options) (*RecipeLock, error) {
	b, err := newBase(conn, RecipeName, opts)
	if err != nil {
		return nil, err
	}
	return &RecipeLock{base: b, holds: map[string]*hold{}, owners: map[ownerKey]string{}}, nil
}

// NewRecipeFromConfig builds a RecipeLock from cfg.Store (a *zk.Conn),
// cfg.Clock and cfg.Rand, refusing the rest with locklab.ErrInvalid.
func NewRecipeFromConfig(cfg locklab.Config) (*RecipeLock, error) {
	conn, opts, err := fromConfig(cfg, RecipeName)
	if err != nil {
		return nil, err
	}
	return NewRecipe(conn, opts)
}

// Path is the node under which the lock on key queues its nodes.
func (l *RecipeLock) Path(key string) string { return l.path(key) }

// Acquire makes one attempt: it enters a hold of the same owner again, or
// creates its node and holds the lock if its node is the lowest, else
// deletes it and fails with ErrNotAcquired. It fails with ErrUnavailable
// when ZooKeeper could not answer (a retryable one when its node vanished
// with its session) and with ErrInvalid for an empty key or a ttl under
// 1ms.
func (l *RecipeLock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.acquire(ctx, key, ttl, false)
}

// Lock waits in the lock's queue until it holds the lock: the recipe's
// blocking acquire, InterProcessMutex.acquire(). Each waiter watches its
// predecessor alone. When ctx ends first, its node is deleted and the
// error wraps ErrNotAcquired, ErrUnavailable and ctx.Err(). A node that
// vanished with its session is created again, as Curator does.
func (l *RecipeLock) Lock(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return l.acquire(ctx, key, ttl, true)
}

func (l *RecipeLock) acquire(ctx context.Context, key string, ttl time.Duration, wait bool) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	start := l.clock.Now()
	owner := reentrant.Owner(ctx)
	if lease, ok := l.reenter(key, owner, start, ttl); ok {
		return lease, nil
	}
	l.sweep(ctx)
	dir := l.Path(key)
	for {
		node, err := l.create(ctx, dir)
		if err != nil {
			return locklab.Lease{}, err
		}
		fence, err := l.queue(ctx, key, dir, node, wait)
		if errors.Is(err, errGone) {
			if !wait {
				return locklab.Lease{}, lockkit.Retryable(unavailable(ctx, err))
			}
			if err := begin(ctx); err != nil {
				return locklab.Lease{}, err
			}
			continue
		}
		if err != nil {
			return locklab.Lease{}, err
		}
		l.mu.Lock()
		l.holds[node] = &hold{key: key, owner: owner, fence: fence, count: 1}
		if owner != "" {
			l.owners[ownerKey{key, owner}] = node
		}
		l.mu.Unlock()
		return locklab.Lease{Key: key, Token: node, Fence: fence, Until: start.Add(ttl)}, nil
	}
}

// reenter enters owner's hold of key again, if it has one.
func (l *RecipeLock) reenter(key, owner string, start time.Time, ttl time.Duration) (locklab.Lease, bool) {
	if owner == "" {
		return locklab.Lease{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	node, ok := l.owners[ownerKey{key, owner}]
	if !ok {
		return locklab.Lease{}, false
	}
	h := l.holds[node]
	h.count++
	return locklab.Lease{Key: key, Token: node, Fence: h.fence, Until: start.Add(ttl)}, true
}

// forget drops the hold of node, whatever its entries.
func (l *RecipeLock) forget(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.holds[node]; h != nil && h.owner != "" {
		delete(l.owners, ownerKey{h.key, h.owner})
	}
	delete(l.holds, node)
}

// create creates the attempt's protected node in dir and returns its path.
// After a create whose answer was lost, the next step looks for the
// attempt's GUID among dir's children before it creates again, as
// Curator's protected mode does; a missing dir is created.
func (l *RecipeLock) create(ctx context.Context, dir string) (string, error) {
	guid, err := l.tokens.Token()
	if err != nil {
		return "", lockkit.Unavailable(err)
	}
	prefix := dir + "/" + protectedPrefix + guid + "-"
	unsure := false // a create may have made a node whose name we never learned
	for attempt := 1; ; attempt++ {
		if err := begin(ctx); err != nil {
			l.orphan(unsure, prefix)
			return "", err
		}
		node, retry, err := l.createStep(dir, prefix, &unsure)
		switch {
		case node != "":
			return node, nil
		case !retry:
			return "", unavailable(ctx, err)
		case attempt == createAttempts:
			l.orphan(unsure, prefix)
			return "", unavailable(ctx, err)
		}
	}
}

// createStep is one step of create: the GUID's search when unsure, else a
// create. retry says whether another step may succeed.
func (l *RecipeLock) createStep(dir, prefix string, unsure *bool) (node string, retry bool, err error) {
	if *unsure {
		found, err := l.find(dir, prefix)
		if found != "" {
			return found, false, nil
		}
		if err != nil && !errors.Is(err, zk.ErrSessionExpired) {
			return "", true, err
		}
		*unsure = false // not there, or gone with its expired session
	}
	node, err = l.conn.Create(prefix+lockName, nil, zk.FlagEphemeralSequential, l.acl)
	switch {
	case err == nil:
		return node, false, nil
	case errors.Is(err, zk.ErrNoNode):
		if perr := l.ensureParents(dir); perr != nil {
			return "", true, perr
		}
		return "", true, err
	case errors.Is(err, zk.ErrConnectionClosed):
		*unsure = true
		return "", true, err
	case errors.Is(err, zk.ErrSessionExpired):
		return "", true, err // a node the expired session made is gone with it
	default:
		return "", false, err
	}
}

// find returns the child of dir whose path starts with prefix, if any.
func (l *RecipeLock) find(dir, prefix string) (string, error) {
	children, _, err := l.conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, c := range children {
		if p := dir + "/" + c; strings.HasPrefix(p, prefix) {
			return p, nil
		}
	}
	return "", nil
}

// queue finds node's place among dir's children: lowest, it returns the
// node's czxid; else Acquire deletes it and is refused, and Lock waits for
// its predecessor's deletion and looks again.
func (l *RecipeLock) queue(ctx context.Context, key, dir, node string, wait bool) (int64, error) {
	name := path.Base(node)
	for {
		if err := begin(ctx); err != nil {
			l.drop(node)
			return 0, err
		}
		children, _, err := l.conn.Children(dir)
		if err != nil {
			return 0, l.failed(ctx, node, err)
		}
		pred, ours := predecessor(children, name)
		if !ours {
			return 0, errGone
		}
		if pred == "" {
			return l.fence(ctx, node)
		}
		if !wait {
			l.drop(node)
			return 0, single.NotAcquired(key)
		}
		if err := begin(ctx); err != nil {
			l.drop(node)
			return 0, ended(ctx, single.NotAcquired(key))
		}
		// getData rather than exists, as Curator: no watch is left on a
		// predecessor that is already gone.
		_, _, ch, err := l.conn.GetW(dir + "/" + pred)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return 0, l.failed(ctx, node, err)
		}
		select {
		case ev := <-ch:
			if errors.Is(ev.Err, zk.ErrSessionExpired) {
				return 0, errGone
			}
			if ev.Err != nil {
				return 0, l.failed(ctx, node, ev.Err)
			}
		case <-ctx.Done():
			l.drop(node)
			return 0, ended(ctx, single.NotAcquired(key))
		}
	}
}

// fence reads the czxid of node, which holds the lock.
func (l *RecipeLock) fence(ctx context.Context, node string) (int64, error) {
	if err := begin(ctx); err != nil {
		l.drop(node)
		return 0, err
	}
	ok, stat, err := l.conn.Exists(node)
	if err != nil {
		return 0, l.failed(ctx, node, err)
	}
	if !ok {
		return 0, errGone
	}
	return stat.Czxid, nil
}

// failed is the end of an attempt whose node exists, or may, after err:
// its node is deleted (or remembered for the next attempt), and the
// attempt fails as unavailable, or as gone when the session expired.
func (l *RecipeLock) failed(ctx context.Context, node string, err error) error {
	if lost(err) {
		return errGone
	}
	l.drop(node)
	return unavailable(ctx, err)
}

// drop deletes an attempt's node; a node it could not delete is
// remembered, and deleted at the start of a later attempt.
func (l *RecipeLock) drop(node string) {
	if err := l.conn.Delete(node, -1); err != nil && !lost(err) {
		l.orphan(true, node)
	}
}

// orphan remembers p, a node's path or protected prefix, when unsure.
func (l *RecipeLock) orphan(unsure bool, p string) {
	if !unsure {
		return
	}
	l.mu.Lock()
	l.orphans = append(l.orphans, p)
	l.mu.Unlock()
}

// sweep deletes the nodes that earlier attempts may have left behind,
// while ctx lasts; those it cannot reach now wait for the next attempt.
func (l *RecipeLock) sweep(ctx context.Context) {
	l.mu.Lock()
	ps := l.orphans
	l.orphans = nil
	l.mu.Unlock()
	var keep []string
	for _, p := range ps {
		if ctx.Err() != nil || !l.remove(p) {
			keep = append(keep, p)
		}
	}
	if len(keep) > 0 {
		l.mu.Lock()
		l.orphans = append(l.orphans, keep...)
		l.mu.Unlock()
	}
}

// remove deletes the nodes whose path starts with p; false when it could
// not tell.
func (l *RecipeLock) remove(p string) bool {
	dir := path.Dir(p)
	children, _, err := l.conn.Children(dir)
	if lost(err) {
		return true
	}
	if err != nil {
		return false
	}
	for _, c := range children {
		if n := dir + "/" + c; strings.HasPrefix(n, p) {
			if err := l.conn.Delete(n, -1); err != nil && !lost(err) {
				return false
			}
		}
	}
	return true
}

// predecessor returns the child that comes right before name in the
// lock's queue ("" when name comes first), and whether name is among the
// children at all. Children are ordered by the sequence number after
// their last "lock-"; one without a number comes before every other.
func predecessor(children []string, name string) (pred string, ours bool) {
	seq := func(c string) int64 {
		i := strings.LastIndex(c, lockName)
		if i < 0 {
			return -1
		}
		n, err := strconv.ParseInt(c[i+len(lockName):], 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	sorted := append([]string(nil), children...)
	sort.SliceStable(sorted, func(i, j int) bool { return seq(sorted[i]) < seq(sorted[j]) })
	for i, c := range sorted {
		if c == name {
			if i == 0 {
				return "", true
			}
			return sorted[i-1], true
		}
	}
	return "", false
}

// checkToken refuses a lease that names no node of the lock on its key.
func (l *RecipeLock) checkToken(lease locklab.Lease) error {
	dir := l.Path(lease.Key) + "/"
	rest, ok := strings.CutPrefix(lease.Token, dir)
	if !ok || !strings.HasPrefix(rest, protectedPrefix) || strings.Contains(rest, "/") || lease.Fence <= 0 {
		return lockkit.Invalid("%s: lease token %q with fence %d is no lock node of %q", RecipeName, lease.Token, lease.Fence, lease.Key)
	}
	return nil
}

// Release leaves the lock once. While re-entries remain it only counts
// down; at the last it deletes the node: ErrNotHeld, deleting nothing,
// when the node is gone (the session expired, or it was released).
func (l *RecipeLock) Release(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	if err := l.checkToken(lease); err != nil {
		return err
	}
	l.mu.Lock()
	if h := l.holds[lease.Token]; h != nil && h.count > 1 {
		h.count--
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	err := l.conn.Delete(lease.Token, -1)
	switch {
	case err == nil:
		l.forget(lease.Token)
		return nil
	case lost(err):
		l.forget(lease.Token)
		return single.NotHeld(lease.Key)
	default:
		return unavailable(ctx, err)
	}
}

// Extend checks that the lease's node is still there, created by the
// lease's acquire (its czxid is the fence) and owned by the connection's
// session, and returns the lease with Until the start of the call plus
// ttl. It fails with ErrNotHeld otherwise, and never creates a node.
func (l *RecipeLock) Extend(ctx context.Context, lease locklab.Lease, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, lease.Key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	if err := l.checkToken(lease); err != nil {
		return locklab.Lease{}, err
	}
	start := l.clock.Now()
	if err := checkOwned(ctx, l.conn, lease.Token, lease); err != nil {
		if errors.Is(err, locklab.ErrNotHeld) {
			l.forget(lease.Token)
		}
		return locklab.Lease{}, err
	}
	lease.Until = start.Add(ttl)
	return lease, nil
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (l *RecipeLock) LeaseClock() locklab.Clock { return l.clock }
