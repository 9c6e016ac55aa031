package stores

import (
	"context"
	"testing"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/node"
)

// TestStartWithFaultServers: beside the server every cell of a store runs
// on, one more for each strategy of that store named, each a server of
// its own; none of another store; Close stops and removes them all.
func TestStartWithFaultServers(t *testing.T) {
	if err := Installed(harness.StorePostgres); err != nil {
		t.Skip(err)
	}
	s, err := StartWithFaultServers(context.Background(), node.BackendProcess, []string{"set-nx-px", "pg-advisory", "pg-lock-table", "pg-advisory"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.PG == nil || len(s.FaultPG) != 2 || len(s.FaultNodes[harness.StorePostgres]) != 2 {
		t.Fatalf("PostgreSQL %v, fault servers %d: want one, and one more for each of pg-advisory and pg-lock-table", s.PG, len(s.FaultPG))
	}
	if s.Etcd != nil || len(s.FaultEtcd) != 0 || len(s.FaultNodes[harness.StoreEtcd]) != 0 {
		t.Error("no etcd strategy was named, yet etcd started")
	}
	ports := map[int]bool{s.PG.Port: true}
	for i, pg := range s.FaultPG {
		if ports[pg.Port] {
			t.Errorf("fault server %d shares port %d", i, pg.Port)
		}
		ports[pg.Port] = true
		if n := s.FaultNodes[harness.StorePostgres][i].(*harness.PGNode); n.Server != pg {
			t.Errorf("fault node %d is not fault server %d", i, i)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pg := range append(s.FaultPG, s.PG) {
		if pg.Pid() != 0 {
			t.Errorf("the server on port %d outlived Close", pg.Port)
		}
	}

	plain, err := Start(context.Background(), node.BackendProcess, []string{"pg-advisory", "pg-lock-table"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.PG == nil || len(plain.FaultPG) != 0 {
		t.Errorf("Start started %d fault servers; want none", len(plain.FaultPG))
	}
}
