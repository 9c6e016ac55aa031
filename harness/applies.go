// The catalog's Applies helpers, and the catalog's lookup by name.

package harness

import (
	"fmt"
	"slices"
	"sort"

	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/strategies"
)

// Scenarios returns the catalog, sorted by name.
func Scenarios() []*Scenario {
	out := make([]*Scenario, len(catalog))
	copy(out, catalog)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// queues is the Applies of the scenarios whose waiter waits in the lock's
// queue on the server, on a lease or a session of its own: the strategies
// their store's Driver names in Queues.
func queues(d strategies.Description) bool {
	st, err := storeOf(d.Family)
	return err == nil && slices.Contains(st.Queues, d.Name)
}

// ownSessions is the Applies of the scenarios whose lock lives in a
// session the server ends when its client falls silent (a ZooKeeper
// session, an etcd lease, a PostgreSQL connection): the strategies of every
// store but the Main one, whose locks are keys with a TTL.
func ownSessions(d strategies.Description) bool {
	st, err := storeOf(d.Family)
	return err == nil && !st.Main
}

// sessionEnds is the Applies of the scenarios whose server ends the
// holder's session: the strategies of the stores whose Driver says their
// locks can live in one and their Store can end it (Terminates).
func sessionEnds(d strategies.Description) bool {
	st, err := storeOf(d.Family)
	return err == nil && st.Terminates
}

// Lookup finds a scenario by name.
func Lookup(name string) (*Scenario, error) {
	for _, s := range catalog {
		if s.Name == name {
			return s, nil
		}
	}
	names := []string{}
	for _, s := range Scenarios() {
		names = append(names, s.Name)
	}
	return nil, fmt.Errorf("unknown scenario %q: valid names are %v", name, names)
}

// LookupWith finds a scenario by name among extra, scenarios of one's own
// (MatrixOptions.Extra), then in the catalog.
func LookupWith(name string, extra ...*Scenario) (*Scenario, error) {
	for _, sc := range extra {
		if sc != nil && sc.Name == name {
			return sc, nil
		}
	}
	return Lookup(name)
}

// CheckScenario reports what keeps sc, a scenario of one's own
// (MatrixOptions.Extra), from running: a missing name, or one the catalog
// has; no client program; a fault or schedule the harness cannot read;
// a property it does not check. Each is locklab.ErrInvalid.
func CheckScenario(sc *Scenario) error {
	if sc == nil {
		return lockkit.Invalid("a nil scenario")
	}
	if sc.Name == "" {
		return lockkit.Invalid("a scenario with no name")
	}
	if _, err := Lookup(sc.Name); err == nil {
		return lockkit.Invalid("scenario %q is the catalog's: give a scenario of one's own a name of its own", sc.Name)
	}
	if len(sc.Programs) == 0 {
		return lockkit.Invalid("scenario %s has no client program", sc.Name)
	}
	switch sc.Property {
	case MutualExclusion, ReleaseSafety, Fencing, NoDeadlock, NoStarvation:
	default:
		return lockkit.Invalid("scenario %s checks %q: want one of %s, %s, %s, %s, %s", sc.Name, sc.Property,
			MutualExclusion, ReleaseSafety, Fencing, NoDeadlock, NoStarvation)
	}
	if _, err := sc.nodeFaults(); err != nil {
		return lockkit.Invalid("scenario %s: %v", sc.Name, err)
	}
	return nil
}
