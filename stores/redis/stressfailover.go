// The Sentinel failover fault of stress mode: the master of a Sentinel
// group is cut off from its replicas and the Sentinels while clients keep
// taking the lock on it, the Sentinels promote a replica, and the old
// master, reconnected, stays a master until the Sentinels demote it.
//
// With StressServers.Sentinels the lock lives on the master of a Redis
// Sentinel group (a master, its asynchronous replicas and the Sentinels
// watching them), found through a locklab.SentinelPool, and the node
// fault fault.Failover cuts that master off from its replicas and the
// Sentinels by turning its default user off, while the clients, which
// authenticate as a user of their own, keep holding and taking the lock
// on it. The Sentinels, which deem it down after 1s
// (down-after-milliseconds), promote a replica; once they have and
// FaultFor has passed, the old master is reconnected, and the Sentinels
// demote it to a replica about 10s later (Sentinel's own timing, not a
// setting: see redisnode). Until then it still answers as a master
// whoever reaches it: the clients that have not yet asked the Sentinels
// again. For that while two masters grant the lock, each to its own
// clients, and the register counts what that does.

package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/stores/redis/redisnode"
	"github.com/locklab/locklab/strategies"
)

// Bounds of the stages of a failover fault that depend on the Sentinels:
// the promotion of a replica after the master was cut off, and the
// demotion of the old master after it was reconnected. The Sentinels take
// about 2s and 10s (they reconfigure an instance that reports the wrong
// role at the first INFO reply more than 4 publish periods, 8s, after the
// one that showed it, and ask it for INFO every 10s); the bounds leave room
// for a loaded machine.
const (
	promoteWithin = 30 * time.Second
	demoteWithin  = 40 * time.Second
)

// checkSentinels checks the options of a run on a Sentinel group.
func (s *StressServers) checkSentinels(o stress.Options, desc strategies.Description) error {
	if len(s.Nodes) > 0 || len(s.Addrs) > 0 || len(s.FaultNodes) > 0 || s.Cluster != nil {
		return lockkit.Invalid("a run on a Sentinel group takes no Nodes, Addrs, FaultNodes or Cluster: " +
			"its clients find the master through the Sentinels")
	}
	for _, f := range o.Faults {
		if f != fault.Failover {
			return lockkit.Invalid("node fault %v cannot be combined with a Sentinel group: its only fault is %s", f, fault.Failover)
		}
	}
	if desc.Properties.MultiNode {
		return lockkit.Invalid("strategy %s needs several independent masters; a Sentinel group has one: "+
			"use a single-node strategy such as set-nx-px", o.Strategy)
	}
	if s.SentinelRefresh < 0 {
		return lockkit.Invalid("SentinelRefresh must not be negative, got %v", s.SentinelRefresh)
	}
	return nil
}

// startSentinels starts a run on a Sentinel group: the clients' user on
// every data node, and the run's own pool on the master, which empties it
// and reads the lock's TTL.
func (r *stressRun) startSentinels(ctx context.Context) error {
	if err := addClientUser(ctx, r.s.Sentinels.Nodes()); err != nil {
		return err
	}
	sp, err := r.sentinelPool()
	if err != nil {
		return err
	}
	r.closers = append(r.closers, func() { sp.Close() })
	r.sources = []locklab.ConnSource{sp}
	return nil
}

// sentinelPool is a pool of the run's on the Sentinel group's master: a
// locklab.SentinelPool. The caller closes it.
func (r *stressRun) sentinelPool() (*locklab.SentinelPool, error) {
	return sentinelPool(r.s.Sentinels.MasterName(), r.s.Sentinels.Addrs(), r.refresh)
}

// sentinelPool is a client's locklab.SentinelPool on master name of the
// Sentinels at sentinels, asking them again every refresh, as clientUser:
// a goroutine client's and a worker process's alike.
func sentinelPool(name string, sentinels []string, refresh time.Duration) (*locklab.SentinelPool, error) {
	return locklab.NewSentinelPool(locklab.SentinelOptions{
		MasterName: name, Sentinels: sentinels, Refresh: refresh,
		Master: locklab.PoolOptions{Username: clientUser, Password: clientPassword},
	})
}

// The ACL user the clients of a run on a Sentinel group authenticate as,
// created on every data node of the group at the start of the run. The
// failover fault disables the default user on the master, which the
// replicas and the Sentinels use, and so cuts the master off from them and
// from nobody else.
const (
	clientUser     = "locklab-stress"
	clientPassword = "locklab-stress"
)

// addClientUser creates the clients' ACL user on every data node of a
// Sentinel group or a Redis Cluster: any of them may become a master.
func addClientUser(ctx context.Context, nodes []*redisnode.Node) error {
	for _, n := range nodes {
		if _, err := n.Do(ctx, "ACL", "SETUSER", clientUser, "reset", "on", ">"+clientPassword, "~*", "&*", "+@all"); err != nil {
			return fmt.Errorf("node %s: creating the clients' ACL user: %w", n.Name(), err)
		}
	}
	return nil
}

// asClient runs one command on n as the clients' user: the default user
// may be off there.
func asClient(ctx context.Context, n *redisnode.Node, cmd string, args ...any) error {
	c, err := redis.DialContext(ctx, "tcp", n.Addr(), redis.DialUsername(clientUser), redis.DialPassword(clientPassword),
		redis.DialConnectTimeout(2*time.Second), redis.DialReadTimeout(2*time.Second), redis.DialWriteTimeout(2*time.Second))
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name(), err)
	}
	defer c.Close()
	if _, err := redis.DoContext(c, ctx, cmd, args...); err != nil {
		return fmt.Errorf("node %s: %s: %w", n.Name(), cmd, err)
	}
	return nil
}

// isolate cuts the master n off from its replicas and the Sentinels, which
// use the default user, and from nobody else: it turns the default user
// off and closes its connections. The clients, authenticated as
// clientUser, keep theirs and may open new ones.
func isolate(ctx context.Context, n *redisnode.Node) error {
	if err := asClient(ctx, n, "ACL", "SETUSER", "default", "off"); err != nil {
		return err
	}
	return asClient(ctx, n, "CLIENT", "KILL", "USER", "default")
}

// reconnect ends isolate: the replicas and the Sentinels reach n again.
func reconnect(ctx context.Context, n *redisnode.Node) error {
	return asClient(ctx, n, "ACL", "SETUSER", "default", "on")
}

// failover cuts the master the Sentinels name off from its replicas and
// the Sentinels, but not from the clients, for at least FaultFor and until
// the Sentinels have promoted a replica; then reconnects it and waits until
// the Sentinels have demoted it to a replica of the new master. The old
// master is always reconnected, even when ctx ends meanwhile; the wait for
// its demotion ends with ctx.
//
// Throughout, the old master keeps answering the clients as a master, so
// that from the promotion on two masters grant the lock: the old one to
// the clients that have not yet asked the Sentinels again (each
// SentinelPool does every StressServers.SentinelRefresh), the new one to
// the others.
//
// s is the strike the run records it as: its stages, its node, its
// error.
func (r *stressRun) failover(ctx context.Context, s *stress.Strike) {
	g := r.s.Sentinels
	bg := context.WithoutCancel(ctx)
	step := func(format string, args ...any) { s.Step(fmt.Sprintf(format, args...)) }
	fail := func(err error) { s.Fail("failover", err) }

	old, err := settledMaster(ctx, g)
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	s.Node(old.Name())
	cut := time.Now()
	err = isolate(bg, old)
	// Reconnect whatever happens: a half-done isolation too.
	connected := false
	defer func() {
		if connected {
			return
		}
		if err := reconnect(bg, old); err != nil {
			fail(err)
		}
	}()
	if err != nil {
		fail(err)
		return
	}
	step("node %s (the master) cut off from its replicas and the Sentinels, not from the clients", old.Name())
	pctx, cancel := context.WithTimeout(ctx, promoteWithin)
	promoted, err := g.WaitFailover(pctx, old)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		} else {
			step("the run ended before a replica was promoted")
		}
		return
	}
	step("the Sentinels name %s the master, %v after the cut; %s still answers as a master",
		promoted.Name(), time.Since(cut).Round(time.Millisecond), old.Name())
	select {
	case <-ctx.Done():
	case <-time.After(s.For() - time.Since(cut)):
	}
	connected = true
	if err := reconnect(bg, old); err != nil {
		fail(err)
		return
	}
	back := time.Now()
	step("node %s reconnected, a master until the Sentinels demote it", old.Name())
	dctx, cancel := context.WithTimeout(ctx, demoteWithin)
	defer cancel()
	for {
		role, err := old.Role(dctx)
		if err == nil && role == "slave" {
			step("node %s demoted to a replica of %s, %v after it was reconnected",
				old.Name(), promoted.Name(), time.Since(back).Round(time.Millisecond))
			return
		}
		select {
		case <-dctx.Done():
			if ctx.Err() == nil {
				fail(fmt.Errorf("node %s not demoted within %v of its reconnection (role %s, %v)", old.Name(), demoteWithin, role, err))
			} else {
				step("the run ended before node %s was demoted", old.Name())
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// settledMaster waits until a majority of the Sentinels name the same
// master (after a failover they may take a while to agree, on a loaded
// machine) and returns it; the wait ends with ctx or after promoteWithin.
func settledMaster(ctx context.Context, g *redisnode.SentinelGroup) (*redisnode.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, promoteWithin)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := g.Master(rctx)
		rcancel()
		if err == nil {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stagger is how long client id waits before it starts, in a run on a
// Sentinel group: the clients' first questions to the Sentinels, and so
// their later ones (every StressServers.SentinelRefresh), spread over
// one refresh period, as those of separate programs would be, instead of
// all the clients moving to a new master in the same millisecond.
func (r *stressRun) stagger(id int) time.Duration {
	if r.s.Sentinels == nil {
		return 0
	}
	return time.Duration(id) * r.refresh / time.Duration(r.o.Clients)
}

// sleepCtx sleeps d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
