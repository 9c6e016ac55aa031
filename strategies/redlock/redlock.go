package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/lockkit"
)

var (
	//go:embed release.lua
	releaseSrc string
	//go:embed extend.lua
	extendSrc string

	releaseScript = rcmd.NewScript("redlock.release", 1, releaseSrc)
	extendScript  = rcmd.NewScript("redlock.extend", 1, extendSrc)
)

// Defaults applied by New where the Config leaves a field zero.
const (
	// DefaultDriftFactor is the clock drift allowance, as a fraction of the
	// TTL, that the Redis documentation suggests.
	DefaultDriftFactor = 0.01
	// MinNodeTimeout and MaxNodeTimeout clamp the default node timeout, a
	// fiftieth of the TTL.
	MinNodeTimeout = 2 * time.Millisecond
	MaxNodeTimeout = 50 * time.Millisecond
	// ReleaseNodeTimeout bounds each node's answer to a Release when
	// Config.NodeTimeout is not set. A release is not time-critical, but
	// one stopped node must not hold it up: keys left on a node that did
	// not answer expire with their TTL.
	ReleaseNodeTimeout = 250 * time.Millisecond
)

// driftFloor is the fixed part of the drift allowance: 2ms for the
// millisecond resolution of Redis's expiry.
const driftFloor = 2 * time.Millisecond

// Redlock is the multi-master lock. It implements locklab.Locker and
// locklab.Extender and is safe for concurrent use.
type Redlock struct {
	nodes       []locklab.ConnSource
	addrs       []string
	quorum      int
	clock       locklab.Clock
	tokens      *locklab.TokenSource
	drift       float64
	nodeTimeout time.Duration // 0: derived from each call's TTL
	retry       locklab.RetryPolicy
	rounds      sync.Pool // of *round
}

var (
	_ locklab.Locker   = (*Redlock)(nil)
	_ locklab.Extender = (*Redlock)(nil)
)

// New builds a Redlock on cfg.Nodes, the independent Redis masters. Their
// number must be odd (see the package documentation). cfg.Clock, cfg.Rand,
// cfg.DriftFactor (default 0.01), cfg.NodeTimeout (default: a fiftieth of the
// TTL, clamped to [2ms, 50ms]) and cfg.Retry (used by Wait) are honoured;
// cfg.Pool is ignored. Bad configuration is an error wrapping
// locklab.ErrInvalid.
func New(cfg locklab.Config) (*Redlock, error) {
	if err := cfg.OnlyOptions("redlock", locklab.OptDriftFactor, locklab.OptNodeTimeout); err != nil {
		return nil, err
	}
	n := len(cfg.Nodes)
	if n == 0 {
		return nil, lockkit.Invalid("redlock: Config.Nodes is empty: give the independent Redis masters (3 or 5 is usual)")
	}
	for i, nd := range cfg.Nodes {
		if rcmd.IsNil(nd) {
			return nil, lockkit.Invalid("redlock: Config.Nodes[%d] is %s", i, rcmd.NilWhat(nd))
		}
	}
	if n%2 == 0 {
		return nil, lockkit.Invalid("redlock: %d nodes: an even count needs %d of them for a majority and so "+
			"tolerates %d failed nodes, no more than %d nodes would; use %d or %d nodes",
			n, n/2+1, n/2-1, n-1, n-1, n+1)
	}
	drift := cfg.DriftFactor
	if drift == 0 {
		drift = DefaultDriftFactor
	}
	if math.IsNaN(drift) || drift < 0 || drift >= 1 {
		return nil, lockkit.Invalid("redlock: DriftFactor %v: want a fraction of the TTL in [0, 1)", cfg.DriftFactor)
	}
	if err := cfg.Retry.Validate(); err != nil {
		return nil, fmt.Errorf("redlock: Config.Retry: %w", err)
	}
	if cfg.NodeTimeout < 0 {
		return nil, lockkit.Invalid("redlock: negative NodeTimeout %v", cfg.NodeTimeout)
	}
	r := &Redlock{
		nodes:       append([]locklab.ConnSource(nil), cfg.Nodes...),
		addrs:       make([]string, n),
		quorum:      n/2 + 1,
		clock:       cfg.ClockOrDefault(),
		tokens:      cfg.Tokens(),
		drift:       drift,
		nodeTimeout: cfg.NodeTimeout,
		retry:       cfg.Retry,
	}
	for i, nd := range cfg.Nodes {
		r.addrs[i] = addrOf(nd)
	}
	r.rounds.New = func() any { return &round{r: r, replies: make([]reply, n), send: make([]bool, n)} }
	return r, nil
}

// addrOf names a node by its Addr or String method, if it has one.
func addrOf(src locklab.ConnSource) string {
	switch s := src.(type) {
	case interface{ Addr() string }:
		return s.Addr()
	case fmt.Stringer:
		return s.String()
	}
	return ""
}

// Nodes is the number of nodes.
func (r *Redlock) Nodes() int { return len(r.nodes) }

// Quorum is the number of nodes that must agree: N/2+1.
func (r *Redlock) Quorum() int { return r.quorum }

// NodeTimeout is how long one node may take to answer during an acquire or
// extend with the given TTL.
func (r *Redlock) NodeTimeout(ttl time.Duration) time.Duration {
	if r.nodeTimeout > 0 {
		return r.nodeTimeout
	}
	return min(max(ttl/50, MinNodeTimeout), MaxNodeTimeout)
}

// DriftAllowance is the part of ttl given up for clock drift:
// DriftFactor*ttl + 2ms.
func (r *Redlock) DriftAllowance(ttl time.Duration) time.Duration {
	return time.Duration(r.drift*float64(ttl)) + driftFloor
}

// Wait acquires key with the Config's Retry policy: after every round that
// did not win, whether refused or failed (too few nodes answered in time, or
// no validity left), it waits a random delay and runs another, until a
// round wins, ctx is done or the attempts run out. See locklab.Wait and the
// package documentation.
func (r *Redlock) Wait(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	return locklab.Wait(ctx, r, key, ttl, r.retry)
}

// checkTTL validates ttl beyond lockkit.CheckAcquire: whole milliseconds, as
// Redis keeps them, and longer than the drift allowance.
func (r *Redlock) checkTTL(ttl time.Duration) (time.Duration, error) {
	ttl = ttl.Truncate(time.Millisecond)
	if a := r.DriftAllowance(ttl); ttl <= a {
		return 0, lockkit.Invalid("redlock: ttl %v leaves no validity after the clock drift allowance of %v", ttl, a)
	}
	return ttl, nil
}

// Acquire makes one attempt (one round) to take key on a majority of the
// nodes, as the package documentation describes. All nodes are asked at once
// and share one deadline, NodeTimeout(ttl) after the start of the attempt
// (and ctx's, if earlier). The lease's Fence is 0 (the package documentation
// says why) and its Until is the end of the validity time, counted from the
// start.
//
// Each node's answer is awaited until the deadline, its connection's set-up
// included; a set-up that outlasts it is not cut short but left to finish
// for the next round (the package documentation says why). A failed round is
// not retried here: locklab.Wait, or Redlock.Wait, retries it.
//
// The outcome is decided by what the nodes answered. A round fails with an
// error wrapping locklab.ErrNotAcquired when the nodes that refused, holding
// the key for other clients, leave no majority to win: even if every node
// that failed had granted, the round would have lost. That error names any
// failed nodes in its text but does not wrap their errors, so
// errors.Is(err, locklab.ErrUnavailable) stays false. Otherwise a round
// without a majority of grants fails with an error wrapping
// locklab.ErrUnavailable: too few nodes answered to decide (refusals and
// failures mixed count as undecided as long as the failed nodes could have
// made the majority), or the attempt took so long that no validity was left.
// That error joins a *NodeError for every failed node, so errors.As finds
// them and errors.Is sees the causes (context errors included), and it is
// marked lockkit.Retryable, so that Wait tries again. Either way the key has
// been released on every node that granted it or may have set it.
func (r *Redlock) Acquire(ctx context.Context, key string, ttl time.Duration) (locklab.Lease, error) {
	if err := lockkit.CheckAcquire(ctx, key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	ttl, err := r.checkTTL(ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	token, err := r.tokens.Token()
	if err != nil {
		return locklab.Lease{}, fmt.Errorf("redlock: drawing a token: %w", err)
	}

	rd := r.newRound(opSet, key, token, ttl.Milliseconds())
	defer r.putRound(rd)
	start := r.clock.Now()
	nctx, cancel := context.WithTimeout(ctx, r.NodeTimeout(ttl))
	rd.run(nctx, true)
	cancel()
	until := start.Add(ttl - r.DriftAllowance(ttl))
	now := r.clock.Now()

	granted, refused, failed := rd.count()
	if granted >= r.quorum && now.Before(until) {
		return locklab.Lease{Key: key, Token: token, Until: until}, nil
	}

	// Failed: take the key back wherever it may have been set (not where
	// the command was refused, answered with an error, or never sent).
	release := false
	for i := range rd.replies {
		rd.send[i] = rd.replies[i].st == stGranted || rd.replies[i].st == stFailed
		release = release || rd.send[i]
	}
	var outcome error
	switch {
	case granted >= r.quorum:
		outcome = fmt.Errorf("%w: redlock: %q granted by %d of %d nodes, but the attempt took %v of the %v ttl "+
			"(drift allowance %v): no validity left", locklab.ErrUnavailable, key, granted, len(r.nodes),
			now.Sub(start), ttl, r.DriftAllowance(ttl))
	case granted+failed < r.quorum:
		// The refusals alone leave no majority: lost, whatever the failed
		// nodes would have said.
		outcome = fmt.Errorf("%w: redlock: %q: %s", locklab.ErrNotAcquired, key, rd.tally(granted, refused, failed))
	case refused == 0:
		outcome = fmt.Errorf("%w: redlock: %q: only %d of %d nodes answered, %d needed for a majority",
			locklab.ErrUnavailable, key, granted, len(r.nodes), r.quorum)
	default:
		outcome = fmt.Errorf("%w: redlock: %q: undecided: granted by %d of %d nodes, refused by %d, %d failed; "+
			"%d needed for a majority, which the failed nodes could have made", locklab.ErrUnavailable, key,
			granted, len(r.nodes), refused, failed, r.quorum)
	}
	var nodeErrs error
	if !errors.Is(outcome, locklab.ErrNotAcquired) {
		nodeErrs = rd.nodeErrors()
	}
	if release {
		// Not time-critical: give each node at least MaxNodeTimeout, so that
		// a short TTL does not turn a busy moment into a key left behind.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(r.NodeTimeout(ttl), MaxNodeTimeout))
		rd.reset(opRelease, key, token, 0)
		rd.run(rctx, false)
		cancel()
	}
	if nodeErrs != nil {
		outcome = fmt.Errorf("%w\n%w", outcome, nodeErrs)
	}
	outcome = withCtx(ctx, outcome)
	if errors.Is(outcome, locklab.ErrUnavailable) {
		outcome = lockkit.Retryable(outcome)
	}
	return locklab.Lease{}, outcome
}

// withCtx adds ctx's error to err when ctx is done and err does not say so
// yet: a node's read deadline can fire before the context does.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// Release deletes the lease's key on every node where it still holds the
// lease's token, in parallel. Each node's answer is bounded by ctx and by
// Config.NodeTimeout, or ReleaseNodeTimeout when that is not set: Release
// returns once every node has answered or timed out. It returns nil when a
// majority
// of the nodes deleted it, an error wrapping locklab.ErrNotHeld when too many
// nodes answered that the key was gone or someone else's for a majority to
// have held it, and otherwise one wrapping locklab.ErrUnavailable that joins
// a *NodeError per failed node. Keys left behind on failed nodes expire with
// their TTL.
func (r *Redlock) Release(ctx context.Context, lease locklab.Lease) error {
	if err := checkLease(ctx, lease); err != nil {
		return err
	}
	rd := r.newRound(opRelease, lease.Key, lease.Token, 0)
	defer r.putRound(rd)
	timeout := r.nodeTimeout
	if timeout <= 0 {
		timeout = ReleaseNodeTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	rd.run(rctx, true)
	cancel()
	done, gone, failed := rd.count()
	switch {
	case done >= r.quorum:
		return nil
	case done+failed < r.quorum:
		return fmt.Errorf("%w: redlock: %q: deleted on %d of %d nodes, gone or taken on %d",
			locklab.ErrNotHeld, lease.Key, done, len(r.nodes), gone)
	}
	return withCtx(ctx, fmt.Errorf("%w: redlock: %q: deleted on %d of %d nodes, %d failed\n%w",
		locklab.ErrUnavailable, lease.Key, done, len(r.nodes), failed, rd.nodeErrors()))
}

// Extend pushes the lease's expiry to ttl from now on a majority of the
// nodes, with a compare-and-PEXPIRE on each, and returns the lease with its
// new Until (validity computed as for Acquire). It fails with an error
// wrapping locklab.ErrNotHeld, without sending anything, when the lease has
// already expired on the Clock, and after sending when too many nodes no
// longer hold the token; a lapsed key is never re-created. When too few nodes
// answer, the error wraps locklab.ErrUnavailable and the old lease stays
// valid until its own Until.
func (r *Redlock) Extend(ctx context.Context, lease locklab.Lease, ttl time.Duration) (locklab.Lease, error) {
	if err := checkLease(ctx, lease); err != nil {
		return locklab.Lease{}, err
	}
	if err := lockkit.CheckAcquire(ctx, lease.Key, ttl); err != nil {
		return locklab.Lease{}, err
	}
	ttl, err := r.checkTTL(ttl)
	if err != nil {
		return locklab.Lease{}, err
	}
	start := r.clock.Now()
	if !start.Before(lease.Until) {
		return locklab.Lease{}, fmt.Errorf("%w: redlock: %q: the lease expired locally %v ago; acquire again",
			locklab.ErrNotHeld, lease.Key, start.Sub(lease.Until))
	}
	rd := r.newRound(opExtend, lease.Key, lease.Token, ttl.Milliseconds())
	defer r.putRound(rd)
	nctx, cancel := context.WithTimeout(ctx, r.NodeTimeout(ttl))
	rd.run(nctx, true)
	cancel()
	until := start.Add(ttl - r.DriftAllowance(ttl))
	now := r.clock.Now()
	done, gone, failed := rd.count()
	switch {
	case done >= r.quorum && now.Before(until):
		lease.Until = until
		return lease, nil
	case done >= r.quorum:
		return locklab.Lease{}, fmt.Errorf("%w: redlock: %q extended on %d of %d nodes, but the round took %v "+
			"of the %v ttl: no validity left", locklab.ErrUnavailable, lease.Key, done, len(r.nodes), now.Sub(start), ttl)
	case done+failed < r.quorum:
		return locklab.Lease{}, fmt.Errorf("%w: redlock: %q: the lock is lost: held on %d of %d nodes, gone or taken on %d",
			locklab.ErrNotHeld, lease.Key, done, len(r.nodes), gone)
	}
	return locklab.Lease{}, withCtx(ctx, fmt.Errorf("%w: redlock: %q: extended on %d of %d nodes, %d failed\n%w",
		locklab.ErrUnavailable, lease.Key, done, len(r.nodes), failed, rd.nodeErrors()))
}

// checkLease is lockkit.CheckLease plus a token: a Redlock lease always has
// one.
func checkLease(ctx context.Context, lease locklab.Lease) error {
	if err := lockkit.CheckLease(ctx, lease); err != nil {
		return err
	}
	if lease.Token == "" {
		return lockkit.Invalid("redlock: lease of %q has no token", lease.Key)
	}
	return nil
}

// NodeError is the failure of one node in a round. Errors of Acquire,
// Release and Extend join one per failed node, so errors.As finds them and
// errors.Is sees through them (to locklab.ErrUnavailable, context errors,
// network errors).
type NodeError struct {
	// Node is the index of the node in Config.Nodes.
	Node int
	// Addr is the node's address where its connection source tells it (by an
	// Addr or String method), else "".
	Addr string
	// Err is what went wrong.
	Err error
}

// Error names the node and tells what went wrong.
func (e *NodeError) Error() string {
	var b strings.Builder
	b.WriteString("redlock node ")
	b.WriteString(strconv.Itoa(e.Node))
	if e.Addr != "" {
		b.WriteString(" (")
		b.WriteString(e.Addr)
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns Err.
func (e *NodeError) Unwrap() error { return e.Err }

// isAnswer reports whether err is an error reply from the server: the node
// answered, and did not execute the command.
func isAnswer(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// LeaseClock is the Clock Lease.Until is read from (Config.Clock), on
// which locklab.Watch judges expiry.
func (r *Redlock) LeaseClock() locklab.Clock { return r.clock }
