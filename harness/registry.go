// The registry of stores: each store's folder registers its Driver from
// its init (RegisterStore), and the harness finds a strategy's store by
// its family.

package harness

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/strategies"
)

var (
	driversMu sync.RWMutex
	drivers   = map[string]*Driver{}
)

// RegisterStore makes the store d describes known to the harness, its
// tellings part of the catalog's scenarios, and its Stress known to stress
// mode. A store's package calls it from its init; it panics on a second
// store of the same name.
func RegisterStore(d *Driver) {
	if d.Name == "" || d.Open == nil {
		panic("harness: RegisterStore needs a Name and Open")
	}
	driversMu.Lock()
	defer driversMu.Unlock()
	if _, dup := drivers[d.Name]; dup {
		panic("harness: store " + d.Name + " registered twice")
	}
	drivers[d.Name] = d
	if d.Stress != nil {
		if d.Stress.Name == "" {
			d.Stress.Name = d.Name
		}
		if d.Stress.Title == "" {
			d.Stress.Title = d.Title
		}
		if d.Stress.Name != d.Name {
			panic("harness: store " + d.Name + "'s stress part is named " + d.Stress.Name)
		}
		stress.RegisterStore(d.Stress)
	}
	for _, sc := range catalog {
		if t, ok := d.Tellings[sc.Name]; ok {
			if sc.Stores == nil {
				sc.Stores = map[string]Telling{}
			}
			sc.Stores[d.Name] = t
		}
	}
}

// driver returns the registered store named name; nil for Redis ("") and
// for a store no package registered.
func driver(name string) *Driver {
	driversMu.RLock()
	defer driversMu.RUnlock()
	return drivers[name]
}

// Stores returns the registered stores other than Redis, in their Rank's
// order.
func Stores() []*Driver {
	driversMu.RLock()
	out := make([]*Driver, 0, len(drivers))
	for _, d := range drivers {
		out = append(out, d)
	}
	driversMu.RUnlock()
	slices.SortFunc(out, func(a, b *Driver) int { return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Name, b.Name)) })
	return out
}

// LookupStore returns the registered store named name.
func LookupStore(name string) (*Driver, error) {
	if d := driver(name); d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("harness: no store %q is registered (import its package under stores/)", name)
}

// PlayLevel is a challenge of locklab play on a store's lock
// (Driver.PlayLevels): break the scenario's property on the strategy,
// reaching Goal, or, Safe, play it to the end and read Why nothing broke.
// Docs is the page of the strategy's family, relative to the docs folder;
// Story, when set, tells the scenario as the level plays it.
type PlayLevel struct {
	ID, Title, Goal    string
	Scenario, Strategy string
	Safe               bool
	Why, Docs, Story   string
}

// StoreInstalled reports whether the servers of store can be started here:
// nil for Redis (harness/node starts its servers, or says why not) and for
// a store whose Driver says nothing, else the Driver's error saying how to
// install them.
func StoreInstalled(store string) error {
	d := driver(store)
	if d == nil || d.Installed == nil {
		return nil
	}
	return d.Installed()
}

// storeOf names the store a strategy of family locks on: "" for Redis.
func storeOf(family string) string {
	if driver(family) != nil {
		return family
	}
	return ""
}

// StoreOfStrategy names the store the registered strategy name locks on
// when it is not Redis ("etcd", "postgres"), else "".
func StoreOfStrategy(name string) string {
	d, err := strategies.Info(name)
	if err != nil {
		return ""
	}
	return storeOf(d.Family)
}

// StoreTitle is how messages name store: "Redis" for "".
func StoreTitle(store string) string {
	if d := driver(store); d != nil {
		return d.Title
	}
	if store == "" {
		return "Redis"
	}
	return store
}
