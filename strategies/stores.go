package strategies

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The packages of the strategies of the stores other than Redis. Each
// brings its store's client, so the registry does not import them: a
// program that uses one imports it, and its init registers its strategies.
const (
	EtcdPackage      = "github.com/locklab/locklab/strategies/etcdlock"
	PostgresPackage  = "github.com/locklab/locklab/strategies/pglock"
	ZooKeeperPackage = "github.com/locklab/locklab/strategies/zklock"
)

// storeStrategies are the names the packages of the other stores register,
// by package: the registry knows them without importing their clients, so
// that New can say which import a program lacks. A test of each package
// checks that it registers exactly these names, and a test here that every
// package of this module that registers strategies is listed.
var storeStrategies = map[string][]string{
	EtcdPackage:      {"etcd-lease", "etcd-mutex"},
	PostgresPackage:  {"pg-advisory", "pg-for-update", "pg-lock-table", "pg-lock-table-sync"},
	ZooKeeperPackage: {"zk-ephemeral", "zk-golib", "zk-recipe"},
}

// familyStores are the packages that register the stores the families
// lock on with the harness (harness.RegisterStore), by family: the
// built-in Redis families' and those of the strategies of
// storeStrategies. The harness names the one a program lacks when it runs
// such a strategy.
var familyStores = map[string]string{
	FamilySetNXGetSet: RedisStorePackage,
	FamilyIncrExpire:  RedisStorePackage,
	FamilySetNXEx:     RedisStorePackage,
	FamilyRedlock:     RedisStorePackage,
	FamilyReentrant:   RedisStorePackage,
	"etcd":            "github.com/locklab/locklab/stores/etcd",
	"postgres":        "github.com/locklab/locklab/stores/postgres",
	"zookeeper":       "github.com/locklab/locklab/stores/zookeeper",
}

// RedisStorePackage is the package that registers the Redis store with
// the harness.
const RedisStorePackage = "github.com/locklab/locklab/stores/redis"

// StorePackage returns the import path of the package that registers the
// store the strategies of family lock on with the harness, for the
// built-in Redis families and those of the stores whose strategies are
// not built in (etcd, PostgreSQL, ZooKeeper), and for a family a
// registered strategy of which names its store's package
// (Description.StorePackage); ok is false for any other family (a lock of
// one's own on Redis, the harness's Main store, or on a store of one's
// own that says nothing).
func StorePackage(family string) (path string, ok bool) {
	if path, ok = familyStores[family]; ok {
		return path, ok
	}
	mu.RLock()
	defer mu.RUnlock()
	for _, e := range registry {
		if e.desc.Family == family && e.desc.StorePackage != "" {
			return e.desc.StorePackage, true
		}
	}
	return "", false
}

// Package returns the import path of the package that registers the
// strategy name, for the strategies of the stores other than Redis (etcd,
// PostgreSQL, ZooKeeper), each in a package of its own that brings its
// store's client.
// The registry knows their names whether or not the package is imported.
// ok is false for the built-in Redis strategies and for names it does not
// know.
func Package(name string) (path string, ok bool) {
	for pkg, names := range storeStrategies {
		if slices.Contains(names, name) {
			return pkg, true
		}
	}
	return "", false
}

// PackageNames returns the names of the strategies that the package pkg
// (EtcdPackage, PostgresPackage, ZooKeeperPackage) registers, sorted, as the registry knows
// them whether or not pkg is imported; nil for any other path.
func PackageNames(pkg string) []string { return slices.Clone(storeStrategies[pkg]) }

// storePackages returns the import paths of storeStrategies, sorted.
func storePackages() []string {
	out := make([]string, 0, len(storeStrategies))
	for pkg := range storeStrategies {
		out = append(out, pkg)
	}
	sort.Strings(out)
	return out
}

// importHint is how to register the strategies of pkg.
func importHint(pkg string) string { return fmt.Sprintf("import _ %q", pkg) }

// unimported describes the other stores' strategies whose package is not
// imported, by package, for an error message; "" when every one is
// registered. The caller holds mu.
func unimported() string {
	var parts []string
	for _, pkg := range storePackages() {
		var missing []string
		for _, n := range storeStrategies[pkg] {
			if _, ok := registry[n]; !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			parts = append(parts, fmt.Sprintf("%s (%s)", strings.Join(missing, ", "), importHint(pkg)))
		}
	}
	return strings.Join(parts, "; ")
}
