// Package stores starts the servers of the stores other than Redis that
// the strategies of the postgres and etcd families lock on: a throwaway
// PostgreSQL server (stores/postgres/pgproc) and a three-member etcd
// cluster (stores/etcd/etcdproc), run as local processes or in
// containers (the process and docker backends, as the Redis nodes' of
// harness/node). The CLI and the documentation generator start them
// through it, so that both run those strategies on the same servers.
package stores

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/strategies"
	_ "github.com/locklab/locklab/strategies/etcdlock" // registers the etcd family
	_ "github.com/locklab/locklab/strategies/pglock"   // registers the postgres family
)

// Servers are the servers started, and their nodes by store, for
// harness.MatrixOptions.Stores; FaultNodes those of the other servers
// StartWithFaultServers starts, for harness.MatrixOptions.FaultStores.
type Servers struct {
	PG         *pgproc.Server
	Etcd       *etcdproc.Cluster
	Nodes      map[string][]harness.Node
	FaultPG    []*pgproc.Server
	FaultEtcd  []*etcdproc.Cluster
	FaultNodes map[string][]harness.Node
}

// Of names the store that strategy name locks on when it is not Redis:
// harness.StorePostgres, harness.StoreEtcd, or "".
func Of(name string) string {
	d, err := strategies.Info(name)
	if err != nil {
		return ""
	}
	switch d.Family {
	case harness.StorePostgres, harness.StoreEtcd:
		return d.Family
	}
	return ""
}

// Installed reports whether the servers of store can be started here: an
// error saying how to install them otherwise.
func Installed(store string) error {
	switch store {
	case harness.StorePostgres:
		_, err := pgproc.BinDir()
		return err
	case harness.StoreEtcd:
		_, err := etcdproc.Binary()
		return err
	}
	return nil
}

// Names are the registered strategies of the stores other than Redis whose
// servers are installed here.
func Names() []string {
	var out []string
	for _, d := range strategies.All() {
		if st := Of(d.Name); st != "" && Installed(st) == nil {
			out = append(out, d.Name)
		}
	}
	return out
}

// Backend resolves the backend the servers run on from the Redis nodes'
// (node.Options.Backend or node.Cluster.Backend): "docker" and "process"
// are themselves; "" is docker when a Docker engine answers, else process,
// as harness/node picks; any other (addrs) gives no store but Redis.
func Backend(ctx context.Context, redis string) (string, error) {
	switch redis {
	case node.BackendDocker, node.BackendProcess:
		return redis, nil
	case "":
		if _, err := dockerbox.Connect(ctx); err == nil {
			return node.BackendDocker, nil
		}
		return node.BackendProcess, nil
	}
	return "", fmt.Errorf("the %s backend gives Redis servers only: use --backend process or docker", redis)
}

// Start starts the servers the strategies named lock on beyond Redis,
// on backend ("process" or "docker", see Backend), each once, all at once;
// none when no strategy of another store is
// named. say, when set, is told each server started, in a line. The
// caller closes them.
func Start(ctx context.Context, backend string, names []string, say func(string)) (*Servers, error) {
	return start(ctx, backend, names, say, false)
}

// StartWithFaultServers is Start with more servers of each store
// (FaultNodes), one for each strategy named that locks there, on which
// the matrix's cells that restart the server run beside the store's other
// cells, each strategy's on a server of its own
// (harness.MatrixOptions.FaultStores). The PostgreSQL servers' data
// directories are copies of the first's (pgproc.StartMany): one initdb
// serves them all.
func StartWithFaultServers(ctx context.Context, backend string, names []string, say func(string)) (*Servers, error) {
	return start(ctx, backend, names, say, true)
}

func start(ctx context.Context, backend string, names []string, say func(string), fault bool) (*Servers, error) {
	s := &Servers{Nodes: map[string][]harness.Node{}, FaultNodes: map[string][]harness.Node{}}
	want := map[string]string{} // store: the first strategy named that locks there
	count := map[string]int{}   // store: the strategies named that lock there
	seen := map[string]bool{}
	for _, name := range names {
		st := Of(name)
		if st == "" || seen[name] {
			continue
		}
		seen[name] = true
		count[st]++
		if want[st] == "" {
			want[st] = name
		}
	}
	if len(want) > 0 && backend != node.BackendProcess && backend != node.BackendDocker {
		return nil, fmt.Errorf("stores: backend %q: want %q or %q", backend, node.BackendProcess, node.BackendDocker)
	}
	servers := func(st string) int {
		if fault {
			return 1 + count[st]
		}
		return 1
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		pgs  []*pgproc.Server
		etcd []*etcdproc.Cluster
	)
	failed := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	if name := want[harness.StorePostgres]; name != "" {
		wg.Go(func() {
			var err error
			if pgs, err = pgproc.StartMany(ctx, servers(harness.StorePostgres), pgproc.Options{Backend: backend}); err != nil {
				failed(fmt.Errorf("starting PostgreSQL for %s: %w", name, err))
			}
		})
	}
	if name := want[harness.StoreEtcd]; name != "" {
		etcd = make([]*etcdproc.Cluster, servers(harness.StoreEtcd))
		for i := range etcd {
			wg.Go(func() {
				var err error
				if etcd[i], err = etcdproc.Start(ctx, etcdproc.Options{Backend: backend}); err != nil {
					failed(fmt.Errorf("starting etcd for %s: %w", name, err))
				}
			})
		}
	}
	wg.Wait()
	if len(pgs) > 0 {
		s.PG = pgs[0]
		s.Nodes[harness.StorePostgres] = []harness.Node{&harness.PGNode{NodeName: "n1", Server: pgs[0]}}
	}
	for _, pg := range pgs[min(1, len(pgs)):] {
		s.FaultPG = append(s.FaultPG, pg)
		s.FaultNodes[harness.StorePostgres] = append(s.FaultNodes[harness.StorePostgres], &harness.PGNode{NodeName: "n1", Server: pg})
	}
	if len(etcd) > 0 && etcd[0] != nil {
		s.Etcd = etcd[0]
		s.Nodes[harness.StoreEtcd] = []harness.Node{&harness.EtcdNode{NodeName: "n1", Cluster: etcd[0]}}
	}
	for _, cl := range etcd[min(1, len(etcd)):] {
		if cl != nil {
			s.FaultEtcd = append(s.FaultEtcd, cl)
			s.FaultNodes[harness.StoreEtcd] = append(s.FaultNodes[harness.StoreEtcd], &harness.EtcdNode{NodeName: "n1", Cluster: cl})
		}
	}
	if len(errs) > 0 {
		s.Close()
		return nil, errors.Join(errs...)
	}
	if say != nil {
		if s.PG != nil {
			line := "PostgreSQL: " + s.PG.Describe()
			var more []string
			for _, pg := range s.FaultPG {
				more = append(more, fmt.Sprintf("%s:%d", pg.Host, pg.Port))
			}
			if len(more) > 0 {
				line += ", and " + strings.Join(more, ", ") + " for the cells that restart it or fail it over"
			}
			say(line)
		}
		if s.Etcd != nil {
			line := "etcd: " + s.Etcd.Describe()
			for _, cl := range s.FaultEtcd {
				line += fmt.Sprintf(", and %s for the cells that restart or kill its leader", strings.Join(cl.Endpoints(), ","))
			}
			say(line)
		}
	}
	return s, nil
}

// Close stops the servers, side by side: each is a process or a container
// of its own, and removing a container costs the engine a while.
func (s *Servers) Close() error {
	if s == nil {
		return nil
	}
	var closers []func() error
	if s.PG != nil {
		closers = append(closers, s.PG.Close)
	}
	if s.Etcd != nil {
		closers = append(closers, s.Etcd.Close)
	}
	for _, pg := range s.FaultPG {
		closers = append(closers, pg.Close)
	}
	for _, ns := range [][]harness.Node{s.Nodes[harness.StorePostgres], s.FaultNodes[harness.StorePostgres]} {
		for _, n := range ns {
			if pn, ok := n.(*harness.PGNode); ok {
				closers = append(closers, pn.Close) // the standby, and the server a failover promoted
			}
		}
	}
	for _, cl := range s.FaultEtcd {
		closers = append(closers, cl.Close)
	}
	errs := make([]error, len(closers))
	var wg sync.WaitGroup
	for i, c := range closers {
		wg.Go(func() { errs[i] = c() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
