// Package etcd is the etcd store of the harness: the clusters the etcd
// family's lock (strategies/etcdlock) runs on, in the matrix and in play,
// and how each gRPC request becomes a step. Importing it registers it
// with the harness (harness.RegisterStore).
//
//	driver.go    the store's Driver: its servers, bounds, n/a cells, tellings
//	node.go      the node: a cluster, whose faults strike its leader, or its members one by one (a member's loss)
//	store.go     a slot's store: each client's etcd client, leases on the run's clock
//	renew.go     the keepalive etcd-lease's users run, on the run's clock
//	wait.go      etcd-mutex's Lock, which waits on a watch between its steps, and its keepalive
//	label.go     how a request and its answer show in a timeline
//	touch.go     what each request reads and writes, and the leases' keys
//	compact.go   the compaction of the cluster's history between runs
//	tellings.go  the scenarios as told for etcd
package etcd

import (
	"context"
	"fmt"
	"strings"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores/etcd/etcdproc"
	"github.com/locklab/locklab/strategies/etcdlock" // registers the etcd family
)

// RestartSchedules bounds a cell whose scenario restarts or kills the
// leader: each fault waits for an election (about half a second). It is a
// safety net above the cells' own counts (restart-loses-lock: 280
// schedules): every cell of the documented matrix is explored to the end
// of its bound.
const RestartSchedules = 2000

// FaultServers is how many clusters the matrix's cells that kill,
// restart or fail over a member run on at once by default: a member starts
// on about a tenth of a second of CPU, and a failover's schedule spends
// most of its time waiting for the election (0.5 to 1 s of silence), so
// more clusters finish those cells sooner on cores that are busy
// elsewhere.
const FaultServers = 6

func init() {
	harness.RegisterStore(&harness.Driver{
		Stress: stressDriver,
		Name:   Name,
		Title:  "etcd",
		Rank:   2,
		Installed: func() error {
			_, err := etcdproc.Binary()
			return err
		},
		Start:        start,
		StartShared:  startShared,
		FaultServers: FaultServers,
		Describe:     describe,
		Open: func(nodes []harness.Node, _ harness.OpenOptions) (harness.Store, error) {
			return newStore(nodes[0].(*Node))
		},
		MultiNode: "a story of Redlock's independent masters: etcd's locks run on one Raft cluster, whose members " +
			"agree on every write before it is acknowledged",
		NA: func(sc *harness.Scenario) string {
			if sc.EndsSessions() {
				return "the session is the lock's lease (etcd-lease's, etcd-mutex's Session's), which the server ends only when its holder falls silent past its TTL: pause-past-ttl " +
					"(a lease revoked by hand ends the same way)"
			}
			return ""
		},
		Tellings:    tellings,
		Known:       known,
		PlayLevels:  playLevels,
		PlayServers: func(int, bool) string { return "a three-member etcd cluster" },
		Columns:     []string{"etcd-lease", etcdlock.MutexName},
		// etcd-mutex's column waits in Mutex.Lock as its users do (wait.go).
		Lockers: map[string]harness.Factory{etcdlock.MutexName: mutexLock},
		Queues:  []string{etcdlock.MutexName},
		Guards:  map[string]string{"etcd-lease": guardWhat, etcdlock.MutexName: guardWhat},
		Limits:  []harness.Limit{{Schedules: RestartSchedules, Where: "on etcd"}},
		// etcd-lease is etcd's concurrency.Mutex on a Session, which keeps
		// its lease alive for as long as its process runs (etcdctl lock
		// too); locklab's etcd-lease does so only with Config.Watchdog.
		Renewals: map[string]string{"etcd-lease": "keepalive"},
		Bench:    bench,
		Abbreviations: func(string) string {
			return "P/: the lock's key prefix (the key and a slash); every contender puts a key under it. " +
				"L1, L2: the leases, numbered in the order the run granted them; P/L1: the key put with lease L1. " +
				"first P/: a read of the key with the lowest create revision under the prefix, the one that holds the lock. " +
				"@N: a key's create revision, which is the lease's fence; rev N: the store's revision after the request. " +
				"The server's column shows whose key holds the lock after the step (-: nobody)."
		},
	})
}

// start starts count three-member clusters on backend, side by side.
func start(ctx context.Context, backend string, count int) ([]harness.StoreNode, error) {
	return harness.StartEach(ctx, count, func(ctx context.Context) (harness.StoreNode, error) {
		return startCluster(ctx, etcdproc.Options{Backend: backend})
	})
}

// startCluster starts one cluster with o, as a node.
func startCluster(ctx context.Context, o etcdproc.Options) (harness.StoreNode, error) {
	cl, err := etcdproc.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	return NewNode("n1", cl), nil
}

// startShared starts the one-member cluster the cells that fault no
// member share: every request of a lock here is linearizable (no
// serializable read), so one member answers each as three do, for a
// third of the work (docs/reduction.md, "One server for the cells that
// fault none").
func startShared(ctx context.Context, backend string) (harness.StoreNode, error) {
	return startCluster(ctx, etcdproc.Options{Backend: backend, Members: 1})
}

// describe names the first cluster, and the others' endpoints.
func describe(first harness.StoreNode, more []harness.StoreNode) string {
	line := first.(*Node).Cluster.Describe()
	for _, n := range more {
		line += fmt.Sprintf(", and %s for the cells that restart or kill its leader", strings.Join(n.(*Node).Cluster.Endpoints(), ","))
	}
	return line
}

// bench is etcd's part of locklab bench --stores: etcd-lease on the
// cluster, every locker on one client.
var bench = &harness.Bench{
	Row:        1,
	Strategies: []string{"etcd-lease"},
	Open: func(_ context.Context, n harness.StoreNode, _ int) (locklab.Config, string, func(), error) {
		cl := n.(*Node).Cluster
		cli, err := cl.Client()
		if err != nil {
			return locklab.Config{}, "", nil, err
		}
		server := fmt.Sprintf("%d member processes %s (%s)", len(cl.Members()), strings.Join(cl.Endpoints(), ","), etcdproc.Version(cl.Bin))
		return locklab.Config{Store: cli}, server, func() { cli.Close() }, nil
	},
}
