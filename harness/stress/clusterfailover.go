// The Redis Cluster failover fault: the master that serves the lock key's
// slot falls behind on its replica, is killed (SIGKILL), the cluster
// elects the replica in its place, and the old master, started again,
// rejoins as a replica.

package stress

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/lockkit"
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

// checkRedisCluster checks the options of a run on a Redis Cluster, and
// that a cluster failover fault has one.
func (o *Options) checkRedisCluster() error {
	if o.RedisCluster == nil {
		if slices.Contains(o.Faults, fault.ClusterFailover) {
			return lockkit.Invalid("node fault %s needs a Redis Cluster (Options.RedisCluster)", fault.ClusterFailover)
		}
		return nil
	}
	if len(o.Nodes) > 0 || len(o.Addrs) > 0 || len(o.FaultNodes) > 0 || o.Sentinels != nil {
		return lockkit.Invalid("a run on a Redis Cluster takes no Nodes, Addrs, FaultNodes or Sentinels: " +
			"its clients find the key's master through a cluster client")
	}
	for _, f := range o.Faults {
		if f != fault.ClusterFailover {
			return lockkit.Invalid("node fault %v cannot be combined with a Redis Cluster: its only fault is %s", f, fault.ClusterFailover)
		}
	}
	if o.desc.NoCluster != "" {
		return lockkit.Invalid("strategy %s cannot run on a Redis Cluster: %s", o.Strategy, o.desc.NoCluster)
	}
	return nil
}

// clusterPool is the lock source of a run on a Redis Cluster: a
// locklab.ClusterPool that logs in as the clients' user. The caller
// closes it.
func (o *Options) clusterPool() (*locklab.ClusterPool, error) {
	return newClusterPool(o.RedisCluster.Addrs())
}

func newClusterPool(addrs []string) (*locklab.ClusterPool, error) {
	return locklab.NewClusterPool(locklab.ClusterOptions{
		Addrs: addrs,
		Node:  locklab.PoolOptions{Username: clientUser, Password: clientPassword},
	})
}

// flushCluster empties every master of the cluster, so a run starts from a
// clean key space.
func flushCluster(ctx context.Context, g RedisCluster) error {
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
// s is the strike the run records it as (recorder.strike): its stages,
// its node, its error.
func (r *recorder) clusterFailover(ctx context.Context, s *Strike) {
	g := r.o.RedisCluster
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
	sleepCtx(ctx, r.o.FaultFor)
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
		if err := addClientUser(bg, []RedisNode{old}); err != nil {
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
func names(ns []RedisNode) string {
	s := ""
	for i, n := range ns {
		if i > 0 {
			s += ", "
		}
		s += n.Name()
	}
	return s
}
