// Node faults: the kinds the stores' runs inject, their names on the
// command line, and the loop that has the store strike its servers, then
// heal them.

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

// KnownFaults are the node faults some run injects: those of each
// registered store (StoreDriver.Faults, Stores' order: the main store's
// first), each once.
func KnownFaults() []fault.Fault {
	var known []fault.Fault
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
	if o.FaultEvery <= 0 {
		o.FaultEvery = 2 * time.Second
	}
	if o.FaultFor <= 0 {
		o.FaultFor = 5 * o.TTL
	}
	return nil
}

// faults injects node faults until ctx ends, one at a time: every
// FaultEvery a kind drawn from the seed (and the node it strikes,
// Strike.Pick), lasting FaultFor. A fault in progress is always healed,
// even when ctx ends meanwhile.
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
		r.strike(kind, rng, func(s *Strike) error { return r.store.Fault(ctx, s) })
		t.Reset(r.o.FaultEvery)
	}
}

// strike runs one node fault of kind: do strikes it, telling s, which
// picks nodes with rng, and returns once the node is healed; the run
// records it.
func (r *recorder) strike(kind fault.Fault, rng *rand.Rand, do func(s *Strike) error) {
	s := &Strike{r: r, nf: NodeFault{Kind: kind, At: r.now()}, rng: rng}
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
