package stress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/locklab/locklab"
)

// FaultNode is a Redis node a run may fault. *node.Node satisfies it; on
// the addrs backend its faults fail with node.ErrUnsupported.
type FaultNode interface {
	Name() string
	// Pause freezes the server until Resume.
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// Kill stops the server at once; Restart starts it again, with the
	// files it wrote (keepData) or wiped.
	Kill(ctx context.Context) error
	Restart(ctx context.Context, keepData bool) error
	// Partition cuts the node off until Heal.
	Partition(ctx context.Context) error
	Heal(ctx context.Context) error
}

// Node fault kinds.
const (
	// FaultPause freezes a node (SIGSTOP or docker pause) for FaultFor.
	FaultPause = "pause"
	// FaultRestart kills a node and, FaultFor later, starts it again with
	// its files wiped: it comes back empty, forgetting every lock it held.
	FaultRestart = "restart"
	// FaultRestartKeep kills a node and starts it again with its files: it
	// comes back with what its append-only file (if any) saved.
	FaultRestartKeep = "restart-keep"
	// FaultPartition cuts a node off from the clients for FaultFor.
	FaultPartition = "partition"
)

// FaultKinds are the node fault kinds, in the order of the constants.
var FaultKinds = []string{FaultPause, FaultRestart, FaultRestartKeep, FaultPartition}

// NodeFault is one node fault injected during a run.
type NodeFault struct {
	Kind string        `json:"kind"`
	Node string        `json:"node"`
	At   time.Duration `json:"at"`
	For  time.Duration `json:"for"`
	// Err is set when the fault or its healing failed.
	Err string `json:"error,omitempty"`
}

// NodeFaultClient is the Client of the timeline events of node faults.
const NodeFaultClient = -1

func (o *Options) faultDefaults() error {
	if len(o.Faults) == 0 {
		return nil
	}
	for _, k := range o.Faults {
		if !slices.Contains(FaultKinds, k) {
			return locklab.Invalid("unknown node fault %q (want %v)", k, FaultKinds)
		}
	}
	if len(o.FaultNodes) == 0 {
		return locklab.Invalid("node faults need nodes to fault")
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
		n := r.o.FaultNodes[rng.IntN(len(r.o.FaultNodes))]
		r.nodeFault(ctx, kind, n)
		t.Reset(r.o.FaultEvery)
	}
}

func (r *recorder) nodeFault(ctx context.Context, kind string, n FaultNode) {
	bg := context.WithoutCancel(ctx)
	f := NodeFault{Kind: kind, Node: n.Name(), At: r.now()}
	var start, end func(context.Context) error
	var what string
	switch kind {
	case FaultPause:
		start, end, what = n.Pause, n.Resume, "paused"
	case FaultPartition:
		start, end, what = n.Partition, n.Heal, "partitioned"
	case FaultRestart, FaultRestartKeep:
		keep := kind == FaultRestartKeep
		start = n.Kill
		end = func(ctx context.Context) error { return n.Restart(ctx, keep) }
		what = "killed, to restart without its data"
		if keep {
			what = "killed, to restart with its data"
		}
	}
	r.mu.Lock()
	r.event(NodeFaultClient, fmt.Sprintf("node %s %s for %v", n.Name(), what, r.o.FaultFor))
	r.mu.Unlock()
	r.faulting.Store(true)
	err := start(bg)
	if err == nil {
		select {
		case <-ctx.Done():
		case <-time.After(r.o.FaultFor):
		}
		err = end(bg)
	}
	r.faultEnded.Store(int64(r.now()))
	r.faulting.Store(false)
	f.For = r.now() - f.At
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		f.Err = err.Error()
		r.event(NodeFaultClient, fmt.Sprintf("node %s: %s failed: %v", n.Name(), kind, err))
	} else {
		r.event(NodeFaultClient, fmt.Sprintf("node %s back after %v", n.Name(), f.For.Round(time.Millisecond)))
	}
	r.nfaults = append(r.nfaults, f)
}
