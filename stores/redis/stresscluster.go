// The Redis Cluster failover fault of stress mode: the master that serves
// the lock key's slot falls behind on its replica, is killed (SIGKILL),
// the cluster elects the replica in its place, and the old master, started
// again, rejoins as a replica.
//
// With StressServers.Cluster the lock lives on a Redis Cluster (three
// masters, a replica each, cluster-node-timeout 1s), reached through a
// locklab.ClusterPool per client, and the node fault
// fault.ClusterFailover fails over the master of the lock key's slot: it
// turns that master's default user off, which cuts its replication link
// (the replica logs in as the default user; the clients do not), for
// FaultFor while the clients keep taking the lock on it; it kills the
// master (SIGKILL); the other masters flag it failing after the node
// timeout and elect its replica, which serves the slot with what it had
// at the cut; the old master is started again with its nodes.conf and
// rejoins as a replica. A Redis Cluster replicates asynchronously and a
// failover always loses what the replica had not received; on loopback
// that is microseconds of writes, so the cut makes the loss certain
// instead of rare. What the new master has lost shows in the register:
// its fence counter is behind the fences already handed out, and a
// holder still inside from before the kill overlaps the next client the
// new master grants the lock to.

package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/stores/redis/redisnode"
	"github.com/locklab/locklab/strategies"
)

// Bounds of the stages of a cluster failover that depend on the cluster:
// the election of the replica (cluster-node-timeout, then the replica's
// election delay of 500ms or more and the masters' votes) and the old
// master's return as a replica. Both take a few seconds at the 1s node
// timeout of redisnode.RedisClusterOptions; the bounds leave room for a loaded
// machine.
const (
	electWithin  = 30 * time.Second
	rejoinWithin = 60 * time.Second
)

// checkCluster checks the options of a run on a Redis Cluster.
func (s *StressServers) checkCluster(o stress.Options, desc strategies.Description) error {
	if len(s.Nodes) > 0 || len(s.Addrs) > 0 || len(s.FaultNodes) > 0 {
		return lockkit.Invalid("a run on a Redis Cluster takes no Nodes, Addrs, FaultNodes or Sentinels: " +
			"its clients find the key's master through a cluster client")
	}
	for _, f := range o.Faults {
		if f != fault.ClusterFailover {
			return lockkit.Invalid("node fault %v cannot be combined with a Redis Cluster: its only fault is %s", f, fault.ClusterFailover)
		}
	}
	if desc.NoCluster != "" {
		return lockkit.Invalid("strategy %s cannot run on a Redis Cluster: %s", o.Strategy, desc.NoCluster)
	}
	return nil
}

// startCluster starts a run on a Redis Cluster: the clients' user on
// every node, every master emptied, and the run's own cluster pool, which
// reads the lock's TTL.
func (r *stressRun) startCluster(ctx context.Context) error {
	g := r.s.Cluster
	if err := addClientUser(ctx, g.Nodes()); err != nil {
		return err
	}
	if err := flushCluster(ctx, g); err != nil {
		return err
	}
	cp, err := newClusterPool(g.Addrs())
	if err != nil {
		return err
	}
	r.closers = append(r.closers, func() { cp.Close() })
	r.sources = []locklab.ConnSource{cp}
	return nil
}

// newClusterPool is a client's locklab.ClusterPool on the cluster whose
// nodes are at addrs, which logs in as the clients' user: a goroutine
// client's and a worker process's alike. The caller closes it.
func newClusterPool(addrs []string) (*locklab.ClusterPool, error) {
	return locklab.NewClusterPool(locklab.ClusterOptions{
		Addrs: addrs,
		Node:  locklab.PoolOptions{Username: clientUser, Password: clientPassword},
	})
}

// flushCluster empties every master of the cluster, so a run starts from a
// clean key space.
func flushCluster(ctx context.Context, g *redisnode.RedisCluster) error {
	masters, _, err := g.Masters(ctx)
	if err != nil {
		return err
	}
	for _, m := range masters {
		if _, err := m.Do(ctx, "FLUSHALL"); err != nil {
			return err
		}
	}
	return nil
}

// clusterFailover fails over the master that serves the lock key's slot:
//
//  1. it cuts the master's replication link (the replica logs in as the
//     default user, which is turned off; the clients, the clients' user,
//     keep writing to the master) for FaultFor: the writes of that time
//     reach the master only, as they would over a slow link, and the loss
//     asynchronous replication allows at any moment is made certain;
//  2. it kills the master (SIGKILL);
//  3. it waits until the cluster has elected the replica in its place
//     (after cluster-node-timeout); the replica serves the slot with what
//     it had at the cut: an older fence counter, and none of the locks
//     taken since;
//  4. it starts the old master again with its nodes.conf: it rejoins as a
//     replica of the new master and drops its data for the new master's.
//
// The clients' cluster pools read the slot map again when the master stops
// answering, and so move to the new master once it is elected.
//
// s is the strike the run records it as: its stages, its node, its
// error.
func (r *stressRun) clusterFailover(ctx context.Context, s *stress.Strike) {
	g := r.s.Cluster
	bg := context.WithoutCancel(ctx)
	step := func(format string, args ...any) { s.Step(fmt.Sprintf(format, args...)) }
	fail := func(err error) { s.Fail("cluster failover", err) }

	wctx, cancel := context.WithTimeout(ctx, rejoinWithin)
	err := g.WaitReady(wctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	old, err := g.MasterOf(bg, r.o.Key)
	if err != nil {
		fail(err)
		return
	}
	_, replicas, err := g.Masters(bg)
	if err != nil {
		fail(err)
		return
	}
	slot, _ := g.KeySlot(bg, r.o.Key)
	s.Node(old.Name())
	if err := isolate(bg, old); err != nil {
		reconnect(bg, old)
		fail(err)
		return
	}
	step("node %s (the master of slot %d) cut off from its replica %s, not from the clients",
		old.Name(), slot, names(replicas[old]))
	sleepCtx(ctx, s.For())
	// Killed, whatever happens: a run that ends here leaves the old
	// master a replica, not cut off.
	if err := g.Kill(bg, old); err != nil {
		reconnect(bg, old)
		fail(err)
		return
	}
	killed := time.Now()
	step("node %s killed (SIGKILL)", old.Name())
	restart := func() {
		if err := g.Restart(bg, old); err != nil {
			fail(err)
			return
		}
		back := time.Now()
		// Its ACL users lived in memory only: the clients' user again,
		// before the node may serve them as a master.
		if err := addClientUser(bg, []*redisnode.Node{old}); err != nil {
			fail(err)
			return
		}
		step("node %s started again with its nodes.conf", old.Name())
		rctx, cancel := context.WithTimeout(ctx, rejoinWithin)
		defer cancel()
		if err := g.WaitRejoined(rctx, old); err != nil {
			if ctx.Err() == nil {
				fail(err)
			} else {
				step("the run ended before node %s rejoined", old.Name())
			}
			return
		}
		step("node %s a replica again, %v after its restart", old.Name(), time.Since(back).Round(time.Millisecond))
	}
	ectx, cancel := context.WithTimeout(ctx, electWithin)
	promoted, err := g.WaitPromoted(ectx, replicas[old])
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		} else {
			step("the run ended before a replica was elected")
		}
		restart()
		return
	}
	step("the cluster elected %s master of slot %d, %v after the kill (cluster-node-timeout %v)",
		promoted.Name(), slot, time.Since(killed).Round(time.Millisecond), g.NodeTimeout())
	restart()
}

// names lists the nodes' names.
func names(ns []*redisnode.Node) string {
	s := ""
	for i, n := range ns {
		if i > 0 {
			s += ", "
		}
		s += n.Name()
	}
	return s
}
