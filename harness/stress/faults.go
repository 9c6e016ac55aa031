// Node faults: the kinds a run injects, their names on the command line,
// and the loop that pauses, restarts or partitions a node, then heals it (a
// Sentinel failover is failover.go's).

package stress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/lockkit"
)

// FaultNode is a Redis node a run may fault. *redisnode.Node satisfies it; on
// the addrs backend its faults fail with fault.ErrUnsupported.
type FaultNode interface {
	Name() string
	fault.Pauser
	fault.Killer
	fault.Restarter
	fault.Partitioner
}

// FaultKinds are the node faults a run injects, each for FaultFor: a node
// paused, killed and started again without its files (fault.Restart) or with
// them (fault.RestartKeep), or partitioned.
var FaultKinds = []fault.Fault{fault.Pause, fault.Restart, fault.RestartKeep, fault.Partition}

// SentinelFaultKinds are the node faults of a run on a Sentinel group
// (Options.Sentinels): a failover of its master.
var SentinelFaultKinds = []fault.Fault{fault.Failover}

// RedisClusterFaultKinds are the node faults of a run on a Redis Cluster
// (Options.RedisCluster): a failover of the master of the key's slot.
var RedisClusterFaultKinds = []fault.Fault{fault.ClusterFailover}

// ParseFaults reads fault names as the CLI takes them ("pause",
// "restart-keep", "failover"). A name that is not one of KnownFaults is an
// error that lists them.
func ParseFaults(names []string) ([]fault.Fault, error) {
	known := KnownFaults()
	out := make([]fault.Fault, 0, len(names))
	for _, s := range names {
		f, err := fault.Parse(s)
		if err != nil || !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown node fault %q (want %s)", s, fault.Join(known))
		}
		out = append(out, f)
	}
	return out, nil
}

// KnownFaults are the node faults some run injects: FaultKinds,
// SentinelFaultKinds, RedisClusterFaultKinds, then those of each
// registered store (StoreDriver.Faults, Stores' order) that are none of
// those, each once.
func KnownFaults() []fault.Fault {
	known := slices.Concat(FaultKinds, SentinelFaultKinds, RedisClusterFaultKinds)
	for _, d := range Stores() {
		for _, f := range d.Faults {
			if !slices.Contains(known, f) {
				known = append(known, f)
			}
		}
	}
	return known
}

// NodeFault is one node fault injected during a run.
type NodeFault struct {
	Kind fault.Fault   `json:"kind"`
	Node string        `json:"node"`
	At   time.Duration `json:"at_ns"`
	For  time.Duration `json:"for_ns"`
	// Err is set when the fault or its healing failed.
	Err string `json:"error,omitempty"`
	// Steps are the stages of a failover, as they happened: the pause,
	// the promotion, the resume and the demotion.
	Steps []Event `json:"steps,omitempty"`
}

// NodeFaultClient is the Client of the timeline events of node faults.
const NodeFaultClient = -1

func (o *Options) faultDefaults() error {
	if len(o.Faults) == 0 {
		return nil
	}
	known := KnownFaults()
	for _, k := range o.Faults {
		if !slices.Contains(known, k) {
			return lockkit.Invalid("node fault %v is not one a run injects (want %s)", k, fault.Join(known))
		}
	}
	if len(o.FaultNodes) == 0 && o.Sentinels == nil && o.RedisCluster == nil && o.Store == nil {
		return lockkit.Invalid("node faults need nodes to fault")
	}
	if o.FaultEvery <= 0 {
		o.FaultEvery = 2 * time.Second
	}
	if o.FaultFor <= 0 {
		o.FaultFor = 5 * o.TTL
	}
	return nil
}

// faults injects node faults until ctx ends, one at a time: every
// FaultEvery a kind and a node drawn from the seed, lasting FaultFor. A
// fault in progress is always healed, even when ctx ends meanwhile.
func (r *recorder) faults(ctx context.Context) {
	rng := rand.New(rand.NewPCG(r.o.Seed, 0xfa017))
	t := time.NewTimer(r.o.FaultEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		kind := r.o.Faults[rng.IntN(len(r.o.Faults))]
		switch {
		case r.store != nil:
			r.strike(kind, func(s *Strike) error { return r.store.Fault(ctx, s) })
		case kind == fault.Failover:
			r.strike(kind, func(s *Strike) error { r.failover(ctx, s); return nil })
		case kind == fault.ClusterFailover:
			r.strike(kind, func(s *Strike) error { r.clusterFailover(ctx, s); return nil })
		default:
			r.nodeFault(ctx, kind, r.o.FaultNodes[rng.IntN(len(r.o.FaultNodes))])
		}
		t.Reset(r.o.FaultEvery)
	}
}

// faultWhat says what a fault does to a node, in the timeline.
var faultWhat = map[fault.Fault]string{
	fault.Pause:       "paused",
	fault.Partition:   "partitioned",
	fault.Restart:     "killed, to restart without its data",
	fault.RestartKeep: "killed, to restart with its data",
}

func (r *recorder) nodeFault(ctx context.Context, kind fault.Fault, n FaultNode) {
	bg := context.WithoutCancel(ctx)
	r.strike(kind, func(s *Strike) error {
		return s.Run(ctx, n.Name(), "node "+n.Name(), fmt.Sprintf("%s for %v", faultWhat[kind], r.o.FaultFor),
			func() error { return fault.Begin(bg, n, kind) }, func() error { return fault.End(bg, n, kind) })
	})
}

// strike runs one node fault of kind: do strikes it, telling s, and
// returns once the node is healed; the run records it.
func (r *recorder) strike(kind fault.Fault, do func(s *Strike) error) {
	s := &Strike{r: r, nf: NodeFault{Kind: kind, At: r.now()}}
	r.faulting.Store(true)
	err := do(s)
	r.faultEnded.Store(int64(r.now()))
	r.faulting.Store(false)
	s.nf.For = r.now() - s.nf.At
	if err != nil {
		s.nf.Err = err.Error()
	}
	r.mu.Lock()
	r.nfaults = append(r.nfaults, s.nf)
	r.mu.Unlock()
}
