// Package fault is the fault contract of the harness's nodes, whatever
// their store: the small interfaces a node implements for each kind of
// fault (Pauser, Killer, Restarter, Partitioner, FailingOver, MemberLoser), the one
// vocabulary of fault kinds that the scenarios, the schedules, the stress
// runs and the CLI share (Fault), Begin and End, which strike a node
// through those interfaces, AtLeader, the faults of a replicated
// cluster (an etcd cluster, a ZooKeeper ensemble) struck at its leader,
// and MemberWipe, such a cluster's member that comes back empty while
// another lags.
// Redis's nodes (stores/redis/redisnode) and each store's node implement it.
package fault

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/locklab/locklab/lockkit"
)

// The faults a node may support, one interface each. Of Redis's nodes
// (stores/redis/redisnode), *Replicated implements them all; *Node all but
// FailingOver (a failover needs a replica), though on the addrs backend its
// faults fail with ErrUnsupported; *SentinelGroup all but Partitioner.
type (
	// Pauser freezes a node until Resume: connections stay open and get
	// no answer.
	Pauser interface {
		Pause(ctx context.Context) error
		Resume(ctx context.Context) error
	}
	// Killer stops a node at once.
	Killer interface {
		Kill(ctx context.Context) error
	}
	// Restarter starts a node again, with the files it wrote (keepData)
	// or wiped; a running node is killed first.
	Restarter interface {
		Restart(ctx context.Context, keepData bool) error
	}
	// Partitioner cuts a node off from clients and other nodes until Heal.
	Partitioner interface {
		Partition(ctx context.Context) error
		Heal(ctx context.Context) error
	}
	// FailingOver replaces a master by a replica that missed its latest
	// writes.
	FailingOver interface {
		Failover(ctx context.Context) error
	}
	// MemberLoser is a replicated cluster (a quorum of members) whose
	// member can lose its data directory while another lags: Lag kills
	// a follower, which misses the writes that follow; Wipe then has
	// another member come back with an emptied data directory while the
	// one that acknowledged those writes with it is down (MemberLoss).
	MemberLoser interface {
		Lag(ctx context.Context) error
		Wipe(ctx context.Context) error
	}
)

// Fault is a kind of node fault. Its text form ("pause", "restart-keep") is
// what scenarios, reports and the CLI's flags use.
type Fault uint8

// The fault kinds. Each has a beginning and an end (see Begin and End).
const (
	// Pause freezes the node; the end resumes it.
	Pause Fault = iota + 1
	// Kill stops the node at once; the end starts it again with its files
	// wiped.
	Kill
	// Restart kills the node; the end starts it again with its files wiped:
	// it comes back empty, forgetting every lock it held.
	Restart
	// RestartKeep kills the node; the end starts it again with its files:
	// it comes back with what its append-only file (if any) saved.
	RestartKeep
	// Partition cuts the node off; the end heals it.
	Partition
	// Failover promotes the node's replica, which missed the latest
	// writes, in its place; it has no end.
	Failover
	// ClusterFailover kills the master of a Redis Cluster that serves a
	// key's slot, lets the cluster elect its replica in its place, and
	// starts it again as a replica. Begin and End do not apply it to
	// any node: harness/stress runs it on a RedisCluster, whose
	// methods (Kill, WaitPromoted, Restart, WaitRejoined) are its stages.
	ClusterFailover
	// LeaderKill kills the leader of a raft cluster (etcd) with SIGKILL
	// and starts it again on its data directory. Begin and End do not
	// apply it to any node: harness/stress runs it on an etcd cluster.
	LeaderKill
	// MemberLoss strikes the members of a replicated cluster, not the
	// node as a whole (MemberLoser): its beginning (a schedule's lag(nN))
	// kills a follower, which lags; its end (wipe(nN)) kills another
	// member and then the leader, starts the first again on an emptied
	// data directory, then the lagging member and the leader. A step of
	// the scenarios' schedules: stress mode does not inject it.
	MemberLoss
)

var faultNames = [...]string{
	Pause: "pause", Kill: "kill", Restart: "restart", RestartKeep: "restart-keep",
	Partition: "partition", Failover: "failover", ClusterFailover: "cluster-failover",
	LeaderKill: "leader-kill", MemberLoss: "member-loss",
}

// All returns every fault kind, in the order of the constants.
func All() []Fault {
	return []Fault{Pause, Kill, Restart, RestartKeep, Partition, Failover, ClusterFailover, LeaderKill, MemberLoss}
}

// String returns the fault's text form.
func (f Fault) String() string {
	if f > 0 && int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("Fault(%d)", uint8(f))
}

// Parse reads a fault's text form. An unknown name is an error wrapping
// locklab.ErrInvalid that lists the known ones.
func Parse(s string) (Fault, error) {
	for _, f := range All() {
		if faultNames[f] == s {
			return f, nil
		}
	}
	return 0, lockkit.Invalid("unknown node fault %q (want %s)", s, Join(All()))
}

// Join is the text forms of fs separated by commas, as the CLI's flags
// take them.
func Join(fs []Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.String()
	}
	return strings.Join(s, ",")
}

// MarshalText returns the text form, so a Fault reads as its name in JSON.
func (f Fault) MarshalText() ([]byte, error) {
	if f == 0 || int(f) >= len(faultNames) {
		return nil, fmt.Errorf("node: no fault %d", uint8(f))
	}
	return []byte(faultNames[f]), nil
}

// UnmarshalText reads the text form.
func (f *Fault) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// Supports reports whether n can both begin and end fault f. (A node may
// implement only one of the two: a Restarter without Killer can end a
// Restart, which is all a schedule's restart(nN) asks.)
//
// A node that also has a CanFault(Fault) bool method is asked as well: a
// Node of the addrs backend has every fault's methods, but the servers are
// not the harness's to pause, kill or cut off. So is one with a
// Refuses(Fault) string method (Refusal).
func Supports(n any, f Fault) bool {
	if c, ok := n.(interface{ CanFault(Fault) bool }); ok && !c.CanFault(f) {
		return false
	}
	if Refusal(n, f) != "" {
		return false
	}
	return step(n, f, false) != nil && step(n, f, true) != nil
}

// Refusal is why n cannot carry out fault f although it has its methods,
// where n says so with a Refuses(Fault) string method ("" where it can,
// or has no such method): a cluster on the docker backend cannot empty a
// member's data directory, which lives in the member's container.
func Refusal(n any, f Fault) string {
	if r, ok := n.(interface{ Refuses(Fault) string }); ok {
		return r.Refuses(f)
	}
	return ""
}

// Noter is a node that says what the fault step it last carried out did
// to its members (which member it struck, whether a member rejoined), for
// the step's notes in a timeline: "" when there is nothing to say. Note
// returns it once.
type Noter interface {
	Note() string
}

// ErrUnsupported is wrapped by the error of a fault that a node cannot
// inject: Redis's addrs backend talks to servers it does not control, so it
// cannot pause, kill, restart or partition them, nor start replicas; a
// store's stress run may lack a fault.
var ErrUnsupported = errors.New("node: operation not supported on this backend")

// ErrNotImplemented is wrapped by the error of Begin or End on a node that
// lacks the fault's interface (it wraps ErrUnsupported too).
var ErrNotImplemented = fmt.Errorf("%w: the node does not implement the fault", ErrUnsupported)

// Begin starts fault f on n: it pauses, kills, partitions or fails it
// over, or makes one of its members lag. A node that refuses it (Refusal)
// is an error wrapping ErrUnsupported that says why; a node that does not implement it is an error wrapping
// ErrNotImplemented.
func Begin(ctx context.Context, n any, f Fault) error {
	return apply(ctx, n, f, false)
}

// End ends fault f on n: it resumes, starts again (with its files for
// RestartKeep, wiped for Kill and Restart) or heals it, or empties a
// member of it (MemberLoss); a failover has no end. A node that refuses
// it is an error wrapping ErrUnsupported; a node that does not implement it is an error wrapping
// ErrNotImplemented.
func End(ctx context.Context, n any, f Fault) error {
	return apply(ctx, n, f, true)
}

func apply(ctx context.Context, n any, f Fault, end bool) error {
	if why := Refusal(n, f); why != "" {
		return fmt.Errorf("%w: %s", ErrUnsupported, why)
	}
	op := step(n, f, end)
	if op == nil {
		verb := "begin"
		if end {
			verb = "end"
		}
		return fmt.Errorf("%w: %T cannot %s %s", ErrNotImplemented, n, verb, f)
	}
	return op(ctx)
}

// step is n's method that begins (or ends) fault f, or nil when n lacks it.
func step(n any, f Fault, end bool) func(context.Context) error {
	pick := func(begin, finish func(context.Context) error) func(context.Context) error {
		if end {
			return finish
		}
		return begin
	}
	switch f {
	case Pause:
		if p, ok := n.(Pauser); ok {
			return pick(p.Pause, p.Resume)
		}
	case Kill, Restart, RestartKeep:
		k, _ := n.(Killer)
		r, _ := n.(Restarter)
		switch {
		case end && r != nil:
			keep := f == RestartKeep
			return func(ctx context.Context) error { return r.Restart(ctx, keep) }
		case !end && k != nil:
			return k.Kill
		}
	case Partition:
		if p, ok := n.(Partitioner); ok {
			return pick(p.Partition, p.Heal)
		}
	case Failover:
		if p, ok := n.(FailingOver); ok {
			return pick(p.Failover, func(context.Context) error { return nil })
		}
	case MemberLoss:
		if p, ok := n.(MemberLoser); ok {
			return pick(p.Lag, p.Wipe)
		}
	}
	return nil
}
