package stores

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/stores/etcd"
	"github.com/locklab/locklab/stores/postgres"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/redis"
	"github.com/locklab/locklab/strategies"
)

// TestStartAndFaultServer: Start starts one server of each store named,
// none of another; FaultServer starts one more at each call, each a
// server of its own; Close stops them.
func TestStartAndFaultServer(t *testing.T) {
	if err := Installed(postgres.Name); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	s, err := Start(ctx, backends.Process, []string{"set-nx-px", "pg-advisory", "pg-lock-table", "pg-advisory"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.First(postgres.Name).(*postgres.Node)
	if first == nil || len(s.Nodes[postgres.Name]) != 1 {
		t.Fatalf("PostgreSQL %v, %d servers: want one", first, len(s.Nodes[postgres.Name]))
	}
	if s.First(etcd.Name) != nil {
		t.Error("no etcd strategy was named, yet etcd started")
	}
	servers := []*pgproc.Server{first.Server}
	ports := map[int]bool{first.Server.Port: true}
	start := FaultServer(backends.Process)
	for i := range 2 {
		n, err := start(ctx, postgres.Name)
		if err != nil {
			t.Fatal(err)
		}
		pg := n.(*postgres.Node).Server
		if ports[pg.Port] {
			t.Errorf("fault server %d shares port %d", i, pg.Port)
		}
		ports[pg.Port] = true
		servers = append(servers, pg)
		if err := n.(*postgres.Node).Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := start(ctx, "mongo"); err == nil {
		t.Error("FaultServer started a server of no store")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pg := range servers {
		if pg.Pid() != 0 {
			t.Errorf("the server on port %d outlived Close", pg.Port)
		}
	}
}

// TestOneRegistrationPerStore: each store registers one harness.Driver,
// and its stress part is known to stress mode by that registration alone,
// under the Driver's name and title; stress mode knows no store the
// harness does not. Redis, the Main store, is one of them.
func TestOneRegistrationPerStore(t *testing.T) {
	var names []string
	for _, d := range harness.Stores() {
		if d.Main {
			assert.Equal(t, redis.Name, d.Name)
		}
		names = append(names, d.Name)
		require.NotNil(t, d.Stress, "%s has a part in stress mode", d.Name)
		assert.Same(t, d.Stress, stress.LookupStore(d.Name), d.Name)
		assert.Equal(t, d.Name, d.Stress.Name)
		assert.Equal(t, d.Title, d.Stress.Title)
	}
	var stressNames []string
	for _, d := range stress.Stores() {
		stressNames = append(stressNames, d.Name)
	}
	assert.ElementsMatch(t, names, stressNames)
	assert.Len(t, names, 4)
}

// TestStorePackagesAreTheDrivers': the package strategies.StorePackage
// names for a registered store's families, which the harness's error
// tells a program that lacks it to import, is the package that registers
// that store.
func TestStorePackagesAreTheDrivers(t *testing.T) {
	checked := 0
	for _, d := range harness.Stores() {
		registrar := runtime.FuncForPC(reflect.ValueOf(d.Open).Pointer()).Name()
		for _, family := range append([]string{d.Name}, d.Families...) {
			pkg, ok := strategies.StorePackage(family)
			if !ok {
				continue
			}
			checked++
			assert.True(t, strings.HasPrefix(registrar, pkg+"."), "family %s: StorePackage says %s, and %s's Open is %s", family, pkg, d.Name, registrar)
		}
	}
	assert.GreaterOrEqual(t, checked, 8, "the built-in Redis families and the three other stores'")
}
