package harness

import (
	"strings"
	"testing"

	"github.com/locklab/locklab/strategies"
)

// TestStoreOfAsksTheRegistry: a strategy's store is the registered store
// its family names, or lists among its Families, or, for a family that
// names no store, the Main store; a family of a store whose package is not
// imported (no store but Redis is, in this package's tests) is an error
// that names the package to import, and so is a store no package
// registered.
func TestStoreOfAsksTheRegistry(t *testing.T) {
	for _, family := range []string{strategies.FamilySetNXEx, strategies.FamilyRedlock, "mine", redisStore} {
		d, err := storeOf(family)
		if err != nil || d.Name != redisStore || !d.Main {
			t.Errorf("storeOf(%q) = %v, %v; want the Redis store", family, d, err)
		}
	}
	for family, pkg := range map[string]string{"etcd": "stores/etcd", "postgres": "stores/postgres", "zookeeper": "stores/zookeeper"} {
		d, err := storeOf(family)
		if err == nil || !strings.Contains(err.Error(), `"github.com/locklab/locklab/`+pkg+`"`) {
			t.Errorf("storeOf(%q) = %v, %v; want an error naming %s", family, d, err, pkg)
		}
	}
	if got := StoreOfStrategy("set-nx-px"); got != redisStore {
		t.Errorf("StoreOfStrategy(set-nx-px) = %q", got)
	}
	if got := StoreTitle(redisStore); got != "Redis" {
		t.Errorf("StoreTitle(%q) = %q", redisStore, got)
	}
	if got := nodeStore([]Node{AddrNode{NodeName: "n1", NodeAddr: "127.0.0.1:1", NodeStore: redisStore}}); got != redisStore {
		t.Errorf("an AddrNode's store is %q", got)
	}
	if err := StoreInstalled(redisStore); err != nil {
		t.Errorf("StoreInstalled(%q) = %v", redisStore, err)
	}
	if err := StoreInstalled("nosuch"); err == nil {
		t.Error("StoreInstalled of a store no package registered is nil")
	}
	if stores := Stores(); len(stores) == 0 || stores[0].Name != redisStore {
		t.Errorf("Stores() does not list Redis first: %v", stores)
	}
}

// TestRegisterStoreRefusesClaimedFamilies: a store whose name or families
// are another store's, or a second Main store, is refused.
func TestRegisterStoreRefusesClaimedFamilies(t *testing.T) {
	open := func([]Node, OpenOptions) (Store, error) { return nil, nil }
	for _, d := range []*Driver{
		{Name: "other", Families: []string{strategies.FamilySetNXEx}, Open: open},
		{Name: strategies.FamilyRedlock, Open: open},
		{Name: "second-main", Main: true, Open: open},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterStore(%s) did not panic", d.Name)
				}
			}()
			RegisterStore(d)
		}()
		if driver(d.Name) != nil {
			t.Errorf("store %s was registered", d.Name)
		}
	}
}
