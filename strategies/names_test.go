package strategies_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
)

// A strategy of another store whose package the program does not import
// is refused with the import it needs; it is still an unknown name.
func TestStoreStrategyNamesItsImport(t *testing.T) {
	for name, pkg := range map[string]string{
		"etcd-lease":         strategies.EtcdPackage,
		"etcd-mutex":         strategies.EtcdPackage,
		"pg-advisory":        strategies.PostgresPackage,
		"pg-for-update":      strategies.PostgresPackage,
		"pg-lock-table":      strategies.PostgresPackage,
		"pg-lock-table-sync": strategies.PostgresPackage,
		"zk-ephemeral":       strategies.ZooKeeperPackage,
		"zk-golib":           strategies.ZooKeeperPackage,
		"zk-recipe":          strategies.ZooKeeperPackage,
	} {
		got, ok := strategies.Package(name)
		require.True(t, ok, name)
		assert.Equal(t, pkg, got, name)
		assert.Contains(t, strategies.PackageNames(pkg), name)
		_, err := strategies.New(name, locklab.Config{Store: struct{}{}})
		require.ErrorIs(t, err, strategies.ErrUnknown, name)
		assert.ErrorIs(t, err, locklab.ErrInvalid, name)
		assert.EqualError(t, err, `strategy "`+name+`" is in package `+pkg+`: import it (import _ "`+pkg+`")`)
		_, err = strategies.Info(name)
		assert.ErrorContains(t, err, `import _ "`+pkg+`"`)
	}
	_, ok := strategies.Package("set-nx-px")
	assert.False(t, ok, "built in")
	_, ok = strategies.Package("nosuch")
	assert.False(t, ok)
	assert.Nil(t, strategies.PackageNames("github.com/locklab/locklab/strategies/setnxex"))

	// An unknown name lists the valid names, and the others' imports.
	_, err := strategies.New("nosuch", locklab.Config{})
	assert.ErrorContains(t, err, `unknown strategy "nosuch": valid names are `)
	assert.ErrorContains(t, err, `; with their package imported: etcd-lease, etcd-mutex (import _ "`+strategies.EtcdPackage+`"); pg-advisory, pg-for-update, pg-lock-table, pg-lock-table-sync (import _ "`+strategies.PostgresPackage+`"); `+
		`zk-ephemeral, zk-golib, zk-recipe (import _ "`+strategies.ZooKeeperPackage+`")`)
}

// Config.Store on a Redis strategy, with no other store's package
// imported: the refusal says which strategies read it, and what to
// import for them. No refusal names an empty list.
func TestStoreRefusalNamesTheImports(t *testing.T) {
	pool := locklab.NewPool("127.0.0.1:1") // never dialled
	defer pool.Close()
	_, err := strategies.New("set-nx-px", locklab.Config{Pool: pool, Store: struct{}{}})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	assert.ErrorContains(t, err, `strategy set-nx-px does not read Config.Store (strategies that do: `+
		`etcd-lease, etcd-mutex (import _ "github.com/locklab/locklab/strategies/etcdlock"); `+
		`pg-advisory, pg-for-update, pg-lock-table, pg-lock-table-sync (import _ "github.com/locklab/locklab/strategies/pglock"); `+
		`zk-ephemeral, zk-golib, zk-recipe (import _ "github.com/locklab/locklab/strategies/zklock"))`)

	set := []func(*locklab.Config){
		func(c *locklab.Config) { c.DriftFactor = 0.1 },
		func(c *locklab.Config) { c.NodeTimeout = time.Second },
		func(c *locklab.Config) { c.Notify = true },
		func(c *locklab.Config) { c.Watchdog = true },
		func(c *locklab.Config) { c.NoWatchdog = true },
		func(c *locklab.Config) { c.Store = struct{}{} },
	}
	for _, name := range strategies.Names() {
		for _, apply := range set {
			cfg := locklab.Config{Pool: pool, Nodes: []locklab.ConnSource{pool}}
			apply(&cfg)
			_, err := strategies.New(name, cfg)
			if err != nil {
				assert.NotContains(t, err.Error(), "do: )", name)
				assert.NotContains(t, err.Error(), "()", name)
			}
		}
	}
}
