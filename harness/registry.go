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
	for _, o := range drivers {
		if d.Main && o.Main {
			panic("harness: stores " + o.Name + " and " + d.Name + " both say they are the Main store")
		}
		for _, f := range append([]string{d.Name}, d.Families...) {
			if f == o.Name || slices.Contains(o.Families, f) {
				panic("harness: the family " + f + " of store " + d.Name + " is store " + o.Name + "'s")
			}
		}
	}
	drivers[d.Name] = d
	if d.Stress != nil {
		if d.Stress.Name == "" {
			d.Stress.Name = d.Name
		}
		if d.Stress.Title == "" {
			d.Stress.Title = d.Title
		}
		if d.Stress.Families == nil {
			d.Stress.Families = d.Families
		}
		d.Stress.Main = d.Main
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

// driver returns the registered store named name; nil for a store no
// package registered.
func driver(name string) *Driver {
	driversMu.RLock()
	defer driversMu.RUnlock()
	return drivers[name]
}

// Stores returns the registered stores, in their Rank's order.
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

// MainStore returns the registered store that says it is the Main one
// (Driver.Main).
func MainStore() (*Driver, error) {
	driversMu.RLock()
	defer driversMu.RUnlock()
	for _, d := range drivers {
		if d.Main {
			return d, nil
		}
	}
	return nil, fmt.Errorf("harness: no registered store is the Main store: import the package of its store under stores/")
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
	// Answer is a schedule known to break the level, run once for its
	// first hint before the explorer is asked: on another store a fault
	// cell's exploration takes minutes. A test plays it. It is the
	// player's steps: where the level is a deadlock, the liveness probe
	// runs after them.
	Answer string
}

// StoreInstalled reports whether the servers of the registered store can
// be started here: nil where its Driver says nothing, else the Driver's
// error saying how to install them; an error for a store no package
// registered.
func StoreInstalled(store string) error {
	d, err := LookupStore(store)
	if err != nil {
		return err
	}
	if d.Installed == nil {
		return nil
	}
	return d.Installed()
}

// storeOf returns the registered store the strategies of family lock on:
// the store named family or listing it among its Families; for a family
// that names a store whose package is not imported, an error naming that
// package; for any other family, the Main store.
func storeOf(family string) (*Driver, error) {
	driversMu.RLock()
	defer driversMu.RUnlock()
	var main *Driver
	for _, d := range drivers {
		if d.Name == family || slices.Contains(d.Families, family) {
			return d, nil
		}
		if d.Main {
			main = d
		}
	}
	if pkg, ok := strategies.StorePackage(family); ok {
		return nil, fmt.Errorf("harness: the strategies of family %q lock on a store that is not registered: import _ %q", family, pkg)
	}
	if main == nil {
		return nil, fmt.Errorf("harness: no registered store takes the strategies of family %q: import the package of its store under stores/", family)
	}
	return main, nil
}

// StrategyStore returns the registered store the registered strategy name
// locks on.
func StrategyStore(name string) (*Driver, error) {
	d, err := strategies.Info(name)
	if err != nil {
		return nil, err
	}
	return storeOf(d.Family)
}

// StoreOfStrategy names the store the registered strategy name locks on
// (a Driver's Name), "" when it is no registered strategy or its store is
// not registered (StrategyStore says why).
func StoreOfStrategy(name string) string {
	d, err := StrategyStore(name)
	if err != nil {
		return ""
	}
	return d.Name
}

// StoreTitle is how messages name the store named store: its Driver's
// Title, or the name itself when no package registered it.
func StoreTitle(store string) string {
	if d := driver(store); d != nil {
		return d.Title
	}
	return store
}
