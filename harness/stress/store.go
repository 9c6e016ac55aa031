// The store contract of stress mode: what a run asks of the store that a
// lock lives on.
//
// Every store is a folder under stores/ whose harness.Driver, which it
// registers from its init as database/sql's drivers do, holds its
// StoreDriver (Driver.Stress); harness.RegisterStore registers that here
// (RegisterStore). This package imports none of the stores and names
// none. A run locks on the store whose servers Options.Store holds; a
// strategy locks on the store whose Name, or one of whose Families, is its
// family (strategies.Description.Family); a strategy whose store is not
// registered is refused, with the package to import.
//
// The store's part of a run (StoreRun) connects each client on its own,
// empties the servers before the clients start, strikes them with the
// store's node faults, tells a deadlock from starvation when nobody takes
// the lock, and closes what it opened. A worker process of a process-mode
// run connects through the StoreDriver's Worker, from the values the
// run's StoreRun gave it (its --store-arg flags).

package stress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/strategies"
)

// StoreServers are the servers of the store that a run locks on
// (Options.Store), which the caller starts and closes. A
// harness.StoreNode, which the store's harness.Driver starts (one server,
// or one cluster), is one: a store's StoreDriver takes the nodes its
// harness.Driver starts.
type StoreServers interface {
	// Store names the store: its StoreDriver's Name.
	Store() string
}

// StoreDriver is a store as stress mode runs a lock on it: its
// harness.Driver's Stress.
type StoreDriver struct {
	// Name names the store and is the family of the strategies that lock
	// on it, as StoreServers.Store and harness.Driver.Name say it; the
	// Driver's Name where it is left empty.
	Name string
	// Families are the other families of the strategies that lock on it;
	// the Driver's Families where it is left empty.
	Families []string
	// Main says it is the harness's main store (harness.Driver.Main),
	// whose node faults messages list first.
	Main bool
	// Title is how messages name it; the Driver's Title where it is left
	// empty.
	Title string
	// Servers says what a run's servers are where the CLI refuses
	// --nodes for a strategy of the store ("runs on a three-member
	// cluster"); "" has it say what it says of a single-node strategy of
	// the main store.
	Servers string

	// Faults are the node faults a run on the store injects, each striking
	// its servers (StoreRun.Fault); a run refuses any other.
	Faults []fault.Fault
	// Own says, of each of Faults that a run on the main store does not
	// inject, what it does and what it takes, for the refusal of a run
	// that is not on the store: "strikes a cluster's leader: it takes a
	// strategy of the store".
	Own map[fault.Fault]string
	// Lease is the granularity of the store's leases, 0 where any TTL of
	// 1ms or more will do: a run's TTL is then a whole multiple of it, at
	// least one, and defaults to it.
	Lease time.Duration

	// Start starts the store's part of a run of o on servers: what the
	// clients connect through, what its faults strike. o is resolved (its
	// defaults applied, its values checked). StoreRun.Close ends it; the
	// servers stay, the caller's.
	Start func(ctx context.Context, servers StoreServers, o Options) (StoreRun, error)
	// Worker gives cfg the connections of a worker process, one client of
	// a process-mode run, from args, the values of its --store-arg flags
	// (StoreRun.WorkerArgs); close releases them. The client's sessions on
	// the servers end with its process.
	Worker func(ctx context.Context, args []string, cfg *locklab.Config) (close func(), err error)
}

// LeaseWords says the granularity of the store's leases in words, for
// messages: "whole seconds".
func (d *StoreDriver) LeaseWords() string {
	if d.Lease == time.Second {
		return "whole seconds"
	}
	return fmt.Sprintf("whole multiples of %v", d.Lease)
}

// StoreRun is a store's part of one run, from StoreDriver.Start to Close.
// The run calls its methods from several goroutines at once: the clients',
// the faults' and the one that watches for a lock nobody takes.
type StoreRun interface {
	// Empty removes what earlier runs left on the servers that would
	// disturb this one, before the clients start; a Shared run, on
	// servers that are not its own, does not call it (see Sweeper).
	Empty(ctx context.Context) error
	// Connect gives cfg the store's connections for one incarnation of
	// goroutine client id (from its start, or its last crash, to its next
	// crash): each request sent through them calls c.Roll once answered,
	// and once c.Crashed they send nothing and open nothing, answering
	// ErrCrashed. close releases them: the incarnation's sessions on the
	// servers end, as the death of its process would end them. What a
	// client keeps across its incarnations, the store keeps by id until
	// Close.
	Connect(ctx context.Context, id int, c Crasher, cfg *locklab.Config) (close func(), err error)
	// WorkerArgs are the values the worker process of client id gets,
	// one --store-arg each, for the StoreDriver's Worker to connect with.
	WorkerArgs(id int) []string
	// Fault strikes the servers with s.Kind, one of the StoreDriver's
	// Faults, for s.For, then heals them, telling s what happens: the
	// node struck and each stage (s.Run is the common shape). It returns
	// once they are healed, even when ctx ends first (the fault is then
	// healed at once), with the error that kept the fault or its healing
	// from going through.
	Fault(ctx context.Context, s *Strike) error
	// Stuck says which liveness violation a lock that nobody took for
	// Options.Stuck, while clients kept trying, is: KindDeadlock (it
	// never frees itself) or KindStarvation. It reports false when the
	// servers cannot tell.
	Stuck(ctx context.Context, key string) (kind string, ok bool)
	// Close releases what Start opened and started.
	Close() error
}

// Sweeper is a StoreRun that removes, when a Shared run ends, what the run
// wrote on servers that hold data of others: the keys of its namespace
// (Options.Namespace). An error fails the run.
type Sweeper interface {
	Sweep() error
}

// Crasher decides when one incarnation of a goroutine client crashes
// (Options.CrashProb).
type Crasher interface {
	// Crashed reports whether the client has crashed: its connections
	// then send nothing more and open none, answering ErrCrashed.
	Crashed() bool
	// Roll is called after each request the client sent: the client may
	// crash there.
	Roll()
}

// ErrCrashed is what a crashed client's connections answer.
var ErrCrashed = errCrashed

// Strike is a node fault being struck on a store's servers
// (StoreRun.Fault). What it is told goes to the run's timeline, and, once
// Fault returns, to Report.NodeFaults; liveness is not judged meanwhile.
type Strike struct {
	r   *recorder
	nf  NodeFault
	rng *rand.Rand
}

// Pick draws one of n nodes, 0 to n-1, for the fault to strike, from the
// run's Seed: the same seed strikes the same nodes.
func (s *Strike) Pick(n int) int { return s.rng.IntN(n) }

// Kind is the fault struck.
func (s *Strike) Kind() fault.Fault { return s.nf.Kind }

// For is how long the fault lasts before it is healed (Options.FaultFor).
func (s *Strike) For() time.Duration { return s.r.o.FaultFor }

// Node names the node struck, as the report shows it.
func (s *Strike) Node(name string) { s.nf.Node = name }

// Elapsed is the time since the fault began.
func (s *Strike) Elapsed() time.Duration { return s.r.now() - s.nf.At }

// Event adds what to the timeline.
func (s *Strike) Event(what string) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.event(NodeFaultClient, what)
}

// Step adds what to the timeline as a stage of the fault, which the
// report lists under it (NodeFault.Steps).
func (s *Strike) Step(what string) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.nf.Steps = append(s.nf.Steps, Event{At: s.r.now(), Client: NodeFaultClient, What: what})
	s.r.event(NodeFaultClient, what)
}

// Fail says the fault failed with err: the report gives err as the
// fault's error (the last one, when it fails more than once) and lists
// "what: err" among its stages.
func (s *Strike) Fail(what string, err error) {
	s.nf.Err = err.Error()
	s.Step(what + ": " + err.Error())
}

// Hold begins the fault, holds it for For (or until ctx ends) and ends
// it: end runs once begin went through, whatever ctx. It returns the
// first error.
func (s *Strike) Hold(ctx context.Context, begin, end func() error) error {
	if err := begin(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(s.For()):
	}
	return end()
}

// Run is a fault of the common shape on the node named name, which the
// timeline calls label: it says what the fault does, holds it (Hold), and
// says how it ended.
func (s *Strike) Run(ctx context.Context, name, label, what string, begin, end func() error) error {
	s.Node(name)
	s.Event(label + " " + what)
	err := s.Hold(ctx, begin, end)
	if err != nil {
		s.Event(fmt.Sprintf("%s: %s failed: %v", label, s.Kind(), err))
	} else {
		s.Event(fmt.Sprintf("%s back after %v", label, s.Elapsed().Round(time.Millisecond)))
	}
	return err
}

var (
	storesMu sync.RWMutex
	stores   = map[string]*StoreDriver{}
)

// RegisterStore makes the store d describes known to stress mode.
// harness.RegisterStore calls it with a Driver's Stress, so a store's
// package registers its Driver alone; it panics on a second store of the
// same name.
func RegisterStore(d *StoreDriver) {
	if d.Name == "" || d.Start == nil || d.Worker == nil {
		panic("stress: RegisterStore needs a Name, Start and Worker")
	}
	storesMu.Lock()
	defer storesMu.Unlock()
	if _, dup := stores[d.Name]; dup {
		panic("stress: store " + d.Name + " registered twice")
	}
	stores[d.Name] = d
}

// LookupStore returns the registered store named name, the family of the
// strategies that lock on it; nil for the other families of a store
// (StoreDriver.Families) and for a store no package registered.
func LookupStore(name string) *StoreDriver {
	storesMu.RLock()
	defer storesMu.RUnlock()
	return stores[name]
}

// storeOf returns the registered store that strategies of family lock
// on: the one named family, or the one of whose Families it is. A family
// whose store the registry knows the package of (strategies.StorePackage)
// and no package registered with stress mode is an error naming that
// package, as the harness's is. Any other family (a lock of one's own,
// registered with a family of its own) gives nil and no error: it locks
// on the store whose servers the run is given (Options.Store). Nothing
// falls back to a store the family does not name.
func storeOf(family string) (*StoreDriver, error) {
	if d := LookupStore(family); d != nil {
		return d, nil
	}
	for _, d := range Stores() {
		if slices.Contains(d.Families, family) {
			return d, nil
		}
	}
	if pkg, ok := strategies.StorePackage(family); ok {
		return nil, fmt.Errorf("the strategies of family %q lock on a store that is not registered with stress mode: import _ %q "+
			"(its harness.Driver's Stress registers it)", family, pkg)
	}
	return nil, nil
}

// Stores returns the registered stores, the Main one first, then by
// Name: the order in which messages list them.
func Stores() []*StoreDriver {
	storesMu.RLock()
	defer storesMu.RUnlock()
	out := make([]*StoreDriver, 0, len(stores))
	for _, d := range stores {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *StoreDriver) int {
		if a.Main != b.Main {
			if a.Main {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
