package zklock_test

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/zklock"
)

var names = []string{zklock.RecipeName, zklock.EphemeralName, zklock.GolibName}

func TestRegistered(t *testing.T) {
	all := strategies.Properties{AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true, Fencing: true, Extend: true}
	want := map[string]strategies.Properties{
		zklock.RecipeName:    all,
		zklock.EphemeralName: all,
		zklock.GolibName:     {AtomicAcquire: true, ServerTTL: true, OwnerCheckedRelease: true},
	}
	for name, props := range want {
		d, err := strategies.Info(name)
		require.NoError(t, err)
		assert.Equal(t, zklock.Family, d.Family, name)
		assert.Equal(t, props, d.Properties, name)
		assert.Equal(t, []string{strategies.OptStore}, d.Options, name)
		assert.NotEmpty(t, d.Weaknesses, name)
	}
	recipe, _ := strategies.Info(zklock.RecipeName)
	assert.Contains(t, recipe.Source, "Recipes")
	assert.Contains(t, recipe.Source, "Curator")
	assert.Contains(t, recipe.Weaknesses[0], "czxid")
	assert.Empty(t, recipe.BrokenByDesign)
	eph, _ := strategies.Info(zklock.EphemeralName)
	assert.Contains(t, eph.Source, "Hunt")
	assert.Contains(t, eph.Weaknesses[0], "wakes them all")
	assert.Contains(t, eph.BrokenByDesign, "between the two")
	golib, _ := strategies.Info(zklock.GolibName)
	assert.Contains(t, golib.Source, "go-zookeeper/zk")
	assert.Contains(t, strings.Join(golib.Weaknesses, " "), "#20")
	assert.Contains(t, strings.Join(golib.Weaknesses, " "), "#229")
}

// TestKnownToTheRegistry: the registry knows the names this package
// registers without importing it, so that a program that forgot the
// import is told it; none of them opens anything for locklab.Close, and
// the strategies package's Closing section lists none.
func TestKnownToTheRegistry(t *testing.T) {
	var mine []string
	for _, d := range strategies.All() {
		if d.Family == zklock.Family {
			mine = append(mine, d.Name)
		}
	}
	assert.Equal(t, strategies.PackageNames(strategies.ZooKeeperPackage), mine)
	for _, n := range mine {
		pkg, ok := strategies.Package(n)
		assert.True(t, ok, n)
		assert.Equal(t, strategies.ZooKeeperPackage, pkg, n)
	}
	src, err := os.ReadFile("../registry.go")
	require.NoError(t, err)
	_, closing, _ := strings.Cut(string(src), "# Closing")
	for _, n := range mine {
		assert.NotContains(t, closing, "\n//   - "+n, "the strategies package's Closing section")
	}
	conn, _ := dial(t, servers(t))
	for _, n := range mine {
		l, err := strategies.New(n, locklab.Config{Store: conn})
		require.NoError(t, err)
		_, closer := l.(io.Closer)
		assert.False(t, closer, n)
		assert.NoError(t, locklab.Close(l), n)
	}
}

func TestConfig(t *testing.T) {
	conn, _ := dial(t, servers(t))
	for _, name := range names {
		l, err := strategies.New(name, locklab.Config{Store: conn})
		require.NoError(t, err, name)
		_, ok := l.(locklab.LeaseClock)
		assert.True(t, ok, name)
		pool := locklab.NewPool("127.0.0.1:1")
		t.Cleanup(func() { pool.Close() })
		for what, cfg := range map[string]locklab.Config{
			"no store":      {},
			"another store": {Store: struct{}{}},
			"nil conn":      {Store: (*zk.Conn)(nil)},
			"a pool too":    {Store: conn, Pool: pool},
			"nodes too":     {Store: conn, Nodes: []locklab.ConnSource{pool}},
			"notify":        {Store: conn, Notify: true},
			"watchdog":      {Store: conn, Watchdog: true},
		} {
			_, err := strategies.New(name, cfg)
			require.ErrorIs(t, err, locklab.ErrInvalid, "%s: %s", name, what)
			assert.Contains(t, err.Error(), name, what)
		}
	}
	_, err := zklock.NewRecipe(nil, zklock.Options{})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	_, err = zklock.NewRecipe(conn, zklock.Options{Patience: time.Second})
	require.ErrorIs(t, err, locklab.ErrInvalid, "patience is zk-golib's")
	_, err = zklock.NewEphemeral(conn, zklock.Options{Patience: time.Second})
	require.ErrorIs(t, err, locklab.ErrInvalid, "patience is zk-golib's")
	_, err = zklock.NewGolib(conn, zklock.Options{Patience: -time.Second})
	require.ErrorIs(t, err, locklab.ErrInvalid)
	for _, root := range []string{"locklab", "/locklab/", "/a//b"} {
		_, err = zklock.NewEphemeral(conn, zklock.Options{Root: root})
		require.ErrorIs(t, err, locklab.ErrInvalid, root)
	}
	l, err := zklock.NewGolib(conn, zklock.Options{Root: "/elsewhere/locks"})
	require.NoError(t, err)
	assert.Equal(t, "/elsewhere/locks/zk-golib/k", l.Path("k"))
}

// TestEscape: every key is one path element of its own, which ZooKeeper
// takes, and the default paths are Path's.
func TestEscape(t *testing.T) {
	for key, want := range map[string]string{
		"orders:42": "orders:42",
		"a/b":       "a%2Fb",
		"100%":      "100%25",
		".":         "%2E",
		"..":        "%2E%2E",
		"...":       "...",
		"a b\x00é":  "a%20b%00%C3%A9",
	} {
		assert.Equal(t, want, zklock.Escape(key), "%q", key)
	}
	assert.Equal(t, "/locklab/zk-recipe/a%2Fb", zklock.Path(zklock.RecipeName, "a/b"))
	seen := map[string]string{}
	for _, k := range []string{"a/b", "a%2Fb", "a", "a/", ".", "%2E", "x y", "x%20y"} {
		e := zklock.Escape(k)
		prev, dup := seen[e]
		assert.False(t, dup, "%q and %q escape alike", k, prev)
		seen[e] = k
	}

	ctx := testCtx(t)
	conn, _ := dial(t, servers(t))
	l, err := zklock.NewEphemeral(conn, zklock.Options{})
	require.NoError(t, err)
	for _, k := range []string{".", "..", "a/b/c" + key(t), "\x7f\u0085\ufff0" + key(t), "%" + key(t)} {
		lease, err := l.Acquire(ctx, k, time.Minute)
		require.NoError(t, err, "%q", k)
		require.NoError(t, l.Release(ctx, lease))
	}
}

// TestFencesGrow: each holder's fence, its node's czxid, is larger than
// the one before, across clients and sessions, with other locks' writes
// in between.
func TestFencesGrow(t *testing.T) {
	t.Parallel()
	ctx, addrs := testCtx(t), servers(t)
	for _, name := range []string{zklock.RecipeName, zklock.EphemeralName} {
		var ls []locklab.Locker
		for range 2 {
			conn, _ := dial(t, addrs)
			l, err := strategies.New(name, locklab.Config{Store: conn})
			require.NoError(t, err)
			ls = append(ls, l)
		}
		k, other := key(t), key(t)+":other"
		var last int64
		for i := range 6 {
			l := ls[i%2]
			lease, err := l.Acquire(ctx, k, time.Minute)
			require.NoError(t, err)
			assert.Greater(t, lease.Fence, last, "%s: holder %d", name, i)
			last = lease.Fence
			o, err := l.Acquire(ctx, other, time.Minute)
			require.NoError(t, err)
			require.NoError(t, l.Release(ctx, lease))
			require.NoError(t, l.Release(ctx, o))
		}
	}
}
