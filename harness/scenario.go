// A scenario: the fields that tell a story of how a lock fails, how it plays
// on a multi-node strategy, and which nodes it needs.

package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/strategies"
)

// Scenario is a story of how a lock fails: the clients' programs, the
// faults that may strike, and the property the story threatens.
type Scenario struct {
	// Name is the identifier used by the CLI ("stale-recovery").
	Name string `json:"name"`
	// Title is a one-line summary.
	Title string `json:"title"`
	// Story tells what happens, in one paragraph.
	Story string `json:"story"`
	// Source names the article or critique the story comes from.
	Source string `json:"source"`
	// Property is what the scenario checks.
	Property Property `json:"property"`
	// Programs are the clients' programs, c1 first.
	Programs []Program `json:"programs"`
	// Schedule, when set, is the schedule the story describes; Demo runs
	// it, and the explorer starts from it.
	Schedule string `json:"schedule,omitempty"`
	// Stores tell the story again for the stores other than Redis, by
	// store (a registered Driver's Name): what the scenario's faults do
	// to a lock there, and where that is written. A store without an
	// entry is told Story.
	Stores map[string]Telling `json:"stores,omitempty"`
	// Known are schedules told or found for a strategy, by its name: the
	// ones the documentation replays. A matrix cell runs each of them,
	// after the scenario's own schedule and before its bounded search, so a
	// counterexample the docs show is never one the cell's search stopped
	// short of. The catalog gives none: each store gives its strategies'
	// (Driver.Known), which the scenario resolved for a strategy holds
	// (On).
	Known map[string][]string `json:"-"`
	// Faults are the events the explorer may insert, each at most once per
	// occurrence in the list ("time", "crash(c1)", "restart(n2)").
	Faults []string `json:"faults,omitempty"`
	// FaultAfter holds a fault back until another has happened, by text:
	// the explorer inserts a fault only into a schedule that already has
	// the fault it names ("time" after "isolate(c1)": partitioned-holder's
	// time passes for a holder that is cut off). A schedule given in full
	// is not held to it.
	FaultAfter map[string]string `json:"-"`
	// MaxFaults bounds how many of Faults one explored schedule uses.
	MaxFaults int `json:"max_faults,omitempty"`
	// Fenced: the protected resource refuses a write whose fence number is
	// below one it has accepted.
	Fenced bool `json:"fenced,omitempty"`
	// Guarded: the protected resource lives on the lock's own store, and
	// each write is one atomic request that the store carries out only
	// while the writer holds the lock (Guarded): an etcd Txn comparing the
	// lock key's create revision, a ZooKeeper multi whose check names the
	// lock node, a Redis script comparing the lock's token, PostgreSQL's
	// UPDATE of a row with a version column. A client that takes the lock
	// reads what its guard needs; a write the store refuses is refused.
	// For the strategies whose store offers the guard (Driver.Guards), on
	// top of Applies.
	Guarded bool `json:"guarded,omitempty"`
	// NoPreemption keeps the explorer to the natural order of the clients
	// (each runs until it blocks or ends): the story is about time, not
	// about interleaving.
	NoPreemption bool `json:"no_preemption,omitempty"`
	// MaxPreemptions, when set, lowers the explorer's preemption bound for
	// this scenario.
	MaxPreemptions int `json:"max_preemptions,omitempty"`
	// Waiter is the client a starvation scenario watches.
	Waiter int `json:"waiter,omitempty"`
	// MultiNode: the scenario is for multi-node strategies (Redlock) and
	// needs Nodes servers; otherwise it is for single-node strategies.
	MultiNode bool `json:"multi_node,omitempty"`
	// Nodes is how many servers the scenario needs (default 1, or 3 for
	// multi-node ones).
	Nodes int `json:"nodes,omitempty"`
	// Needs lists the node faults the scenario uses (fault.Restart,
	// fault.Failover): it is n/a on nodes that cannot do them.
	Needs []fault.Fault `json:"needs,omitempty"`
	// Several, on a story told for one node, is how it plays on several
	// (Redlock's independent masters); nil when it has no meaning there,
	// which the story then says.
	Several *Several `json:"several,omitempty"`
	// AppendFsync, when set, turns on the append-only file of every node
	// that can take it, with this fsync policy ("always"), for each run.
	AppendFsync string `json:"append_fsync,omitempty"`
	// Applies, when set, narrows the strategies the scenario is for.
	Applies func(d strategies.Description) bool `json:"-"`
}

// Telling is a scenario's story as told for one store.
type Telling struct {
	Title  string `json:"title"`
	Story  string `json:"story"`
	Source string `json:"source"`
}

// For returns the scenario's title, story and source as told for store
// ("" is Redis).
func (s *Scenario) For(store string) Telling {
	if t, ok := s.Stores[store]; ok {
		return t
	}
	return Telling{Title: s.Title, Story: s.Story, Source: s.Source}
}

// Several is how a story told for one node plays on several: the same
// clients and property, with a schedule and faults that name the nodes the
// story's fault strikes (one, a minority or a majority). Stories of faults
// and time, not of interleaving, keep the explorer to the natural order,
// where the fan-out of three nodes would otherwise multiply the schedules.
type Several struct {
	// Schedule is the story's schedule on several nodes; "" explores from
	// the natural order (a schedule written for one node does not fit
	// three).
	Schedule string `json:"schedule,omitempty"`
	// Faults and MaxFaults replace the scenario's when Faults is set.
	Faults    []string `json:"faults,omitempty"`
	MaxFaults int      `json:"max_faults,omitempty"`
	// NoPreemption keeps the explorer to the natural order.
	NoPreemption bool `json:"no_preemption,omitempty"`
	// MaxPreemptions, when set, lowers the explorer's preemption bound.
	MaxPreemptions int `json:"max_preemptions,omitempty"`
}

// EndsSessions reports whether the scenario's server ends a client's
// sessions: a terminate(cN) among its faults.
func (s *Scenario) EndsSessions() bool {
	for _, f := range s.Faults {
		if st, err := parseStep(f); err == nil && st.Kind == StepTerminate {
			return true
		}
	}
	return false
}

// AppliesTo reports whether the scenario is meant for the strategy d.
func (s *Scenario) AppliesTo(d strategies.Description) bool {
	if d.Properties.MultiNode && !s.MultiNode && s.Several == nil {
		return false
	}
	if s.MultiNode && !d.Properties.MultiNode {
		return false
	}
	if s.Guarded && guardNA(d) != "" {
		return false
	}
	return s.Applies == nil || s.Applies(d)
}

// On is the scenario as it runs on strategy d: s itself, or a copy with
// the schedules d's store knows for d among its Known (Driver.Known) and,
// for a multi-node strategy on a story told for one node, the story's
// schedule, faults and bounds on several nodes.
func (s *Scenario) On(d strategies.Description) *Scenario {
	if dr, err := storeOf(d.Family); err == nil && len(dr.Known[s.Name][d.Name]) > 0 {
		// The schedules its store knows for the strategy.
		m := *s
		m.Known = maps.Clone(s.Known)
		if m.Known == nil {
			m.Known = map[string][]string{}
		}
		m.Known[d.Name] = append(slices.Clone(s.Known[d.Name]), dr.Known[s.Name][d.Name]...)
		s = &m
	}
	if !d.Properties.MultiNode || s.MultiNode || s.Several == nil {
		return s
	}
	m := *s
	m.MultiNode, m.Nodes, m.Several = true, 0, nil
	m.Schedule = s.Several.Schedule
	if len(s.Several.Faults) > 0 {
		m.Faults, m.MaxFaults = s.Several.Faults, s.Several.MaxFaults
	}
	m.NoPreemption = s.NoPreemption || s.Several.NoPreemption
	m.MaxPreemptions = s.Several.MaxPreemptions
	return &m
}

// NodesFor is how many Redis servers the scenario runs on for strategy d.
func (s *Scenario) NodesFor(d strategies.Description) int {
	if !d.Properties.MultiNode {
		return 1
	}
	return s.On(d).nodes()
}

// nodeFaults are the node fault steps of the scenario's schedule and fault
// alphabet: each names the node it strikes.
func (s *Scenario) nodeFaults() ([]Step, error) {
	sched, err := ParseSchedule(s.Schedule)
	if err != nil {
		return nil, err
	}
	alpha, err := s.alphabet()
	if err != nil {
		return nil, err
	}
	var out []Step
	for _, st := range append(sched, alpha...) {
		if f, _ := st.fault(); f != 0 {
			out = append(out, st)
		}
	}
	return out, nil
}

// alphabet is the scenario's faults as steps, in the order listed (a fault
// listed twice may strike twice).
func (s *Scenario) alphabet() ([]Step, error) {
	out := make([]Step, 0, len(s.Faults))
	for _, f := range s.Faults {
		st, err := parseStep(f)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *Scenario) nodes() int {
	if s.Nodes > 0 {
		return s.Nodes
	}
	if s.MultiNode {
		return 3
	}
	return 1
}

// NodesNeeded is how many Redis servers the scenario runs on.
func (s *Scenario) NodesNeeded() int { return s.nodes() }

// appendOnly is a node whose append-only file can be switched on and off.
type appendOnly interface {
	SetAppendOnly(ctx context.Context, on bool, fsync string) error
}

// unsupported says why the scenario cannot run on nodes ("" when it can):
// a node fault strikes a node that cannot do it, or the node a restart
// keeps the data of cannot write an append-only file.
func (s *Scenario) unsupported(nodes []Node) (string, error) {
	steps, err := s.nodeFaults()
	if err != nil {
		return "", err
	}
	for _, st := range steps {
		if st.Node > len(nodes) {
			return fmt.Sprintf("needs node n%d", st.Node), nil
		}
		n := nodes[st.Node-1]
		f, _ := st.fault()
		if why := fault.Refusal(n, f); why != "" {
			return fmt.Sprintf("n%d: %s", st.Node, why), nil
		}
		if !fault.Supports(n, f) {
			return fmt.Sprintf("n%d cannot %s", st.Node, f), nil
		}
		if _, ok := n.(appendOnly); s.AppendFsync != "" && f == fault.RestartKeep && !ok {
			return fmt.Sprintf("n%d cannot write an append-only file", st.Node), nil
		}
	}
	return "", nil
}
