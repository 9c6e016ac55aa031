package stores

import (
	"context"
	"testing"

	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/stores/etcd"
	"github.com/locklab/locklab/stores/postgres"
	"github.com/locklab/locklab/stores/postgres/pgproc"
)

// TestStartWithFaultServers: beside the server every cell of a store runs
// on, one more for each strategy of that store named, each a server of
// its own; none of another store; Close stops and removes them all.
func TestStartWithFaultServers(t *testing.T) {
	if err := Installed(postgres.Name); err != nil {
		t.Skip(err)
	}
	s, err := StartWithFaultServers(context.Background(), node.BackendProcess, []string{"set-nx-px", "pg-advisory", "pg-lock-table", "pg-advisory"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.First(postgres.Name).(*postgres.Node)
	if first == nil || len(s.FaultNodes[postgres.Name]) != 2 {
		t.Fatalf("PostgreSQL %v, fault servers %d: want one, and one more for each of pg-advisory and pg-lock-table", first, len(s.FaultNodes[postgres.Name]))
	}
	if s.First(etcd.Name) != nil || len(s.FaultNodes[etcd.Name]) != 0 {
		t.Error("no etcd strategy was named, yet etcd started")
	}
	servers := []*pgproc.Server{first.Server}
	ports := map[int]bool{first.Server.Port: true}
	for i, n := range s.FaultNodes[postgres.Name] {
		pg := n.(*postgres.Node).Server
		if ports[pg.Port] {
			t.Errorf("fault server %d shares port %d", i, pg.Port)
		}
		ports[pg.Port] = true
		servers = append(servers, pg)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pg := range servers {
		if pg.Pid() != 0 {
			t.Errorf("the server on port %d outlived Close", pg.Port)
		}
	}

	plain, err := Start(context.Background(), node.BackendProcess, []string{"pg-advisory", "pg-lock-table"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.First(postgres.Name) == nil || len(plain.FaultNodes[postgres.Name]) != 0 {
		t.Errorf("Start started %d fault servers; want none", len(plain.FaultNodes[postgres.Name]))
	}
}
