// Replication inside a cluster: a replica started for a master, its link cut,
// its promotion, and the wait until it has caught up.

package redisnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/internal/tooling/backends"
)

// AddReplica starts a new node that replicates master, named after it
// ("n1r1", "n1r2", ...), and waits until it has synchronized. The replica
// reaches the master the way the cluster's nodes reach each other, so a
// partition of the master also cuts replication. Not supported on the addrs
// backend.
func (c *Cluster) AddReplica(ctx context.Context, master *Node) (*Node, error) {
	return c.addReplica(ctx, master, "", func(r *Node) { c.replicas = append(c.replicas, r) })
}

// addReplica starts a replica of master named name ("" for the next
// "<master>rK") and files it with attach.
func (c *Cluster) addReplica(ctx context.Context, master *Node, name string, attach func(*Node)) (*Node, error) {
	if master == nil || master.cluster != c {
		return nil, errors.New("node: AddReplica: master is not a node of this cluster")
	}
	if c.be.name() == backends.Addrs {
		return nil, unsupported("add a replica", master.name)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("node: AddReplica on a closed cluster")
	}
	if name == "" {
		k := 1
		for _, r := range c.replicas {
			if strings.HasPrefix(r.name, master.name+"r") {
				k++
			}
		}
		name = master.name + "r" + strconv.Itoa(k)
	}
	idx := c.nextIdx
	c.nextIdx++
	c.mu.Unlock()
	master.mu.Lock()
	p := master.persist
	master.mu.Unlock()
	r, err := c.startNode(ctx, idx, name, p, nil, attach)
	if err != nil {
		return nil, err
	}
	// Start the full sync at once instead of waiting for more replicas.
	if _, err := master.do(ctx, "CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		return nil, fmt.Errorf("node %s: %w", master.name, err)
	}
	host, port, _ := net.SplitHostPort(master.srv.peerAddr())
	if _, err := r.do(ctx, "REPLICAOF", host, port); err != nil {
		return nil, fmt.Errorf("node %s: REPLICAOF %s %s: %w", name, host, port, err)
	}
	if err := r.waitSynced(ctx, master, 10*time.Second, 20*time.Millisecond); err != nil {
		return nil, fmt.Errorf("node %s: replica of %s did not sync: %w\n%s", name, master.name, err, r.srv.logTail(10))
	}
	return r, nil
}

// Failover plays the classic lost-write failover: it stops replica's
// replication link, runs write (the writes the replica will miss; nil for
// none) while master still accepts them, kills master and promotes replica
// to a master. Afterwards replica answers as a master without the writes
// made by write.
func (c *Cluster) Failover(ctx context.Context, master, replica *Node, write func(ctx context.Context) error) error {
	if err := replica.StopReplication(ctx); err != nil {
		return err
	}
	if write != nil {
		if err := write(ctx); err != nil {
			return fmt.Errorf("node: Failover: writes on %s: %w", master.name, err)
		}
	}
	if err := master.Kill(ctx); err != nil {
		return err
	}
	return replica.Promote(ctx)
}

// StopReplication cuts a replica's link to its master while keeping its data:
// it points the replica at an address where nothing listens, so it stops
// receiving writes but stays a read-only replica until Promote.
func (n *Node) StopReplication(ctx context.Context) error {
	if _, err := n.Do(ctx, "REPLICAOF", "127.0.0.1", "1"); err != nil {
		return err
	}
	return nil
}

// Promote turns a replica into a master (REPLICAOF NO ONE), keeping the data
// it has.
func (n *Node) Promote(ctx context.Context) error {
	_, err := n.Do(ctx, "REPLICAOF", "NO", "ONE")
	return err
}

// Role returns "master" or "slave" as INFO replication reports it.
func (n *Node) Role(ctx context.Context) (string, error) {
	info, err := redis.String(n.Do(ctx, "INFO", "replication"))
	if err != nil {
		return "", err
	}
	return infoFields(info)["role"], nil
}

// waitSynced waits until replica n has the link to master up and has
// applied everything master sent: a PUBLISH on master (replicated, but
// touching no key) moves the replication offset, and n must reach it. It
// polls on one connection to each.
func (n *Node) waitSynced(ctx context.Context, master *Node, timeout, poll time.Duration) error {
	// The whole wait is bounded by timeout, not each INFO by a read
	// timeout: a full resync forks the master and loads a snapshot on the
	// replica, which a loaded machine slows.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mc, err := master.dialWaiting(ctx)
	if err != nil {
		return err
	}
	defer mc.Close()
	rc, err := n.dialWaiting(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if _, err := redis.DoContext(mc, ctx, "PUBLISH", "__locklab_sync", "1"); err != nil {
			return err
		}
		minfo, err := redis.String(redis.DoContext(mc, ctx, "INFO", "replication"))
		if err != nil {
			return err
		}
		want, _ := strconv.ParseInt(infoFields(minfo)["master_repl_offset"], 10, 64)
		info, err := redis.String(redis.DoContext(rc, ctx, "INFO", "replication"))
		if err != nil {
			return err
		}
		f := infoFields(info)
		got, _ := strconv.ParseInt(f["slave_repl_offset"], 10, 64)
		if f["master_link_status"] == "up" && f["master_sync_in_progress"] == "0" && got >= want && want > 0 {
			return nil
		}
		last = fmt.Sprintf("master_link_status=%s, offset %d of %d", f["master_link_status"], got, want)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
	return fmt.Errorf("not synced within %v (%s)", timeout, last)
}
