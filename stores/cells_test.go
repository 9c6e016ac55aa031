package stores

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/stores/etcd"
	"github.com/locklab/locklab/stores/postgres"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
	"github.com/locklab/locklab/stores/redis"
)

// TestStoreCellsSayWhyNA: on PostgreSQL and etcd, a scenario without
// meaning there is n/a with the store's reason, before anything runs (the
// nodes here reach no server), and the part of the matrix of those
// strategies leaves out the rows of Redlock's independent masters.
func TestStoreCellsSayWhyNA(t *testing.T) {
	stores := map[string][]harness.Node{postgres.Name: {&postgres.Node{NodeName: "n1"}}, etcd.Name: {&etcd.Node{NodeName: "n1"}}}
	m, err := harness.Matrix(context.Background(), harness.MatrixOptions{
		Strategies: []string{"pg-advisory", "etcd-lease"},
		Scenarios:  []string{"redlock-restart", "stale-recovery-getset"},
		Stores:     stores,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[[2]string]string{
		{"pg-advisory", "redlock-restart"}:       "lives on one server",
		{"etcd-lease", "redlock-restart"}:        "one Raft cluster",
		{"pg-advisory", "stale-recovery-getset"}: "stale-recovery's",
		{"etcd-lease", "stale-recovery-getset"}:  "stale-recovery's",
	}
	for k, w := range want {
		c, ok := m.Cell(k[0], k[1])
		if !ok || c.Outcome != harness.NA || !strings.Contains(c.Message, w) {
			t.Errorf("%s × %s: %s %q, want n/a saying %q", k[0], k[1], c.Outcome, c.Message, w)
		}
	}
	part := m.Only(func(s string) bool { return Of(s) != "" })
	if got := strings.Join(part.Scenarios, " "); got != "stale-recovery-getset" {
		t.Errorf("the stores' part has scenarios %q; want Redlock's left out", got)
	}
	if harness.StoreOfStrategy("set-nx-px") != redis.Name || harness.StoreOfStrategy("pg-lock-table") != postgres.Name {
		t.Error("StoreOfStrategy names the wrong store")
	}
	if Of("set-nx-px") != "" || Of("pg-lock-table") != postgres.Name {
		t.Error("Of names the wrong store")
	}
}

// TestMemberLossNA: member-loses-data is n/a on Redis and PostgreSQL with
// each store's reason (no quorum of members), before anything runs (the
// nodes here reach no server).
func TestMemberLossNA(t *testing.T) {
	m, err := harness.Matrix(context.Background(), harness.MatrixOptions{
		Strategies: []string{"set-nx-px", "set-nx-px-wait", "redlock", "pg-advisory", "pg-lock-table-sync"},
		Scenarios:  []string{"member-loses-data"},
		Nodes:      []harness.Node{harness.AddrNode{NodeName: "n1", NodeAddr: "127.0.0.1:1", NodeStore: redis.Name}},
		Stores:     map[string][]harness.Node{postgres.Name: {&postgres.Node{NodeName: "n1"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{"set-nx-px", "set-nx-px-wait", "redlock", "pg-advisory", "pg-lock-table-sync"} {
		c, ok := m.Cell(st, "member-loses-data")
		if !ok || c.Outcome != harness.NA || !strings.Contains(c.Message, "no quorum to lose a member of") {
			t.Errorf("%s: %s %q, want n/a for want of a quorum", st, c.Outcome, c.Message)
		}
	}
}

// TestFaultStores: a cell that restarts the server runs on one of the
// store's other servers (MatrixOptions.FaultStores), whose postmaster it
// restarts (its process is a new one), while the other cells run on the
// first, which nothing restarts; each cell's verdict is the one it has
// alone on one server.
func TestFaultStores(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules on PostgreSQL")
	}
	main := pgtest.Start(t, pgproc.Options{})
	spares := []*pgproc.Server{pgtest.Start(t, pgproc.Options{}), pgtest.Start(t, pgproc.Options{})}
	mainNode := &postgres.Node{NodeName: "n1", Server: main}
	spareNodes := []harness.Node{&postgres.Node{NodeName: "n1", Server: spares[0]}, &postgres.Node{NodeName: "n1", Server: spares[1]}}
	mainPid, sparePids := main.Pid(), []int{spares[0].Pid(), spares[1].Pid()}
	m, err := harness.Matrix(context.Background(), harness.MatrixOptions{
		Strategies:       []string{"pg-advisory"},
		Scenarios:        []string{"restart-loses-lock", "pause-past-ttl", "ttl-pushed-by-waiters"},
		Stores:           map[string][]harness.Node{postgres.Name: {mainNode}},
		FaultStores:      map[string][]harness.Node{postgres.Name: spareNodes},
		StorePreemptions: harness.StorePreemptions, StoreSchedules: harness.StoreSchedules,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		scenario string
		want     harness.Outcome
	}{
		{"restart-loses-lock", harness.Violated},
		{"pause-past-ttl", harness.Safe},
		{"ttl-pushed-by-waiters", harness.Safe},
	} {
		c, ok := m.Cell("pg-advisory", w.scenario)
		if !ok || c.Outcome != w.want {
			t.Errorf("pg-advisory × %s: %s, want %s", w.scenario, c.Outcome, w.want)
		}
	}
	if main.Pid() != mainPid {
		t.Error("a cell restarted the server the cells that fault nothing run on")
	}
	restarted := 0
	for i, s := range spares {
		if s.Pid() != sparePids[i] {
			restarted++
		}
	}
	if restarted != 1 {
		t.Errorf("%d spare servers restarted, want the one restart-loses-lock ran on", restarted)
	}
}

// TestStartFaultServer: the cells that fault the server run on etcd
// clusters the matrix starts as they need them (StartFaultServer), no
// more than FaultServers, a cell's other workers on clusters of their
// own; every one is stopped when the matrix returns, and the cells have
// the verdicts and schedule counts of a run on one cluster, one worker at
// a time.
func TestStartFaultServer(t *testing.T) {
	if testing.Short() {
		t.Skip("explores schedules that restart and fail over etcd members")
	}
	if err := Installed(etcd.Name); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	start := FaultServer(backends.Process)
	var mu sync.Mutex
	var clusters []*etcd.Node
	counted := func(ctx context.Context, store string) (harness.Node, error) {
		n, err := start(ctx, store)
		if err == nil {
			mu.Lock()
			clusters = append(clusters, n.(*etcd.Node))
			mu.Unlock()
		}
		return n, err
	}
	first, err := start(ctx, etcd.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer first.(*etcd.Node).Close()
	opts := harness.MatrixOptions{
		Strategies:       []string{"etcd-lease"},
		Scenarios:        []string{"restart-loses-lock", "failover-loses-lock", "pause-past-ttl"},
		Stores:           map[string][]harness.Node{etcd.Name: {first}},
		StartFaultServer: counted,
		FaultServers:     3,
		Workers:          3,
		StorePreemptions: 1,
		StoreSchedules:   8,
	}
	m, err := harness.Matrix(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(clusters) == 0 || len(clusters) > 3 {
		t.Errorf("%d fault clusters started; want 1 to 3", len(clusters))
	}
	for i, c := range clusters {
		for _, mb := range c.Cluster.Members() {
			if mb.Pid() != 0 {
				t.Errorf("fault cluster %d's member %s outlived the matrix", i, mb.Name)
			}
		}
	}

	one := opts
	one.Workers, one.FaultServers = 1, 1
	one.StartFaultServer = start
	alone, err := harness.Matrix(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range opts.Scenarios {
		got, _ := m.Cell("etcd-lease", sc)
		want, _ := alone.Cell("etcd-lease", sc)
		if got.Outcome != want.Outcome || got.Schedules != want.Schedules || got.Schedule != want.Schedule {
			t.Errorf("etcd-lease × %s: %s in %d schedules (%q) on several clusters, %s in %d (%q) on one",
				sc, got.Outcome, got.Schedules, got.Schedule, want.Outcome, want.Schedules, want.Schedule)
		}
		if got.Outcome == harness.NA {
			t.Errorf("etcd-lease × %s: n/a", sc)
		}
	}
}

// TestFaultServersOf: a store's own count of fault servers where its
// driver gives one (etcd's), the default elsewhere.
func TestFaultServersOf(t *testing.T) {
	if got := harness.FaultServersOf(etcd.Name); got != etcd.FaultServers {
		t.Errorf("etcd: %d fault servers, want its own %d", got, etcd.FaultServers)
	}
	if got := harness.FaultServersOf(postgres.Name); got != harness.DefaultFaultServers {
		t.Errorf("postgres: %d fault servers, want the default %d", got, harness.DefaultFaultServers)
	}
	if got := harness.FaultServersOf("no-such-store"); got != harness.DefaultFaultServers {
		t.Errorf("an unknown store: %d fault servers, want the default %d", got, harness.DefaultFaultServers)
	}
}
