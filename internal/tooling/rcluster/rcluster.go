// Package rcluster forms a Redis Cluster out of running redis-servers
// started with --cluster-enabled yes, and watches it, through nothing but
// their addresses: whatever runs the servers (local processes, containers)
// hands their addresses here. It assigns the hash slots, introduces the
// nodes to each other, attaches the replicas, waits until the cluster is
// ready, and answers who serves what, before and after a failover.
// internal/tooling/redisproc (test clusters of processes) and
// stores/redis/redisnode (the harness's clusters on the process and docker
// backends) share it.
package rcluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// DefaultNodeTimeout is the cluster-node-timeout of the clusters locklab
// starts unless told otherwise: long enough that a loaded machine does not
// fail nodes over by itself.
const DefaultNodeTimeout = 2 * time.Second

// Directives are the configuration directives, name and value, that every
// node of a cluster locklab forms is started with; nodeTimeout is
// cluster-node-timeout, how long a node may not answer before the others
// count it as failing and its replica takes over. A process gives them as
// "--name value" arguments, a container as lines of its configuration file.
func Directives(nodeTimeout time.Duration) [][2]string {
	return [][2]string{
		{"cluster-enabled", "yes"},
		{"cluster-config-file", "nodes.conf"},
		{"cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)},
		// A replica takes over however long it was cut off: a failover
		// test kills a master right after writing, or after cutting its
		// replication link.
		{"cluster-replica-validity-factor", "0"},
		{"repl-diskless-sync", "yes"},
		{"repl-diskless-sync-delay", "0"},
	}
}

// Args are Directives as command-line arguments.
func Args(nodeTimeout time.Duration) []string {
	var out []string
	for _, d := range Directives(nodeTimeout) {
		out = append(out, "--"+d[0], d[1])
	}
	return out
}

// Member is one node of a cluster.
type Member struct {
	// Addr is the address the node announces, "host:port": clients and
	// the other nodes dial it, CLUSTER SLOTS and MOVED name it.
	Addr string
	// Bus is the node's cluster bus port, where the other nodes reach it;
	// 0 means the port of Addr plus 10000, Redis's default.
	Bus int
	// ID is the node's cluster id (CLUSTER MYID), filled by Form; a node
	// keeps it across restarts (nodes.conf).
	ID string
}

// Cluster is a set of members to form into a cluster, or formed: the
// masters first, then the replicas (those of master i are
// Members[Masters+i*Replicas:][:Replicas]). Roles change after a failover;
// Roles tells the current ones.
type Cluster struct {
	Masters, Replicas int
	Members           []*Member
	// Dial opens a connection to addr; nil dials plain TCP.
	Dial func(ctx context.Context, addr string) (redis.Conn, error)

	mu   sync.Mutex
	dead map[*Member]bool
}

// Form assigns the slots in even ranges to the masters, introduces the
// nodes to each other, attaches the replicas and waits until the cluster is
// ready (WaitReady). The error then says what was awaited and what the
// nodes said.
func (c *Cluster) Form(ctx context.Context) error {
	if err := c.form(ctx); err != nil {
		return fmt.Errorf("forming a Redis Cluster of %d masters and %d replicas each: %w\n%s", c.Masters, c.Replicas, err, c.State())
	}
	return nil
}

func (c *Cluster) form(ctx context.Context) error {
	if len(c.Members) != c.Masters*(1+c.Replicas) || c.Masters < 1 {
		return fmt.Errorf("%d members for %d masters with %d replicas each", len(c.Members), c.Masters, c.Replicas)
	}
	for i, m := range c.Members {
		id, err := redis.String(c.Do(ctx, m, "CLUSTER", "MYID"))
		if err != nil {
			return err
		}
		m.ID = id
		// Distinct epochs from the start, as redis-cli --cluster create
		// sets them: the nodes need not settle a collision first.
		if _, err := c.Do(ctx, m, "CLUSTER", "SET-CONFIG-EPOCH", i+1); err != nil {
			return err
		}
	}
	for i := range c.Masters {
		lo, hi := i*Slots/c.Masters, (i+1)*Slots/c.Masters
		args := make([]any, 0, 1+hi-lo)
		args = append(args, "ADDSLOTS")
		for s := lo; s < hi; s++ {
			args = append(args, s)
		}
		if _, err := c.Do(ctx, c.Members[i], "CLUSTER", args...); err != nil {
			return err
		}
	}
	first := c.Members[0]
	host, port, err := net.SplitHostPort(first.Addr)
	if err != nil {
		return err
	}
	meet := []any{"MEET", host, port}
	if first.Bus != 0 {
		meet = append(meet, first.Bus)
	}
	for _, m := range c.Members[1:] {
		if _, err := c.Do(ctx, m, "CLUSTER", meet...); err != nil {
			return err
		}
	}
	if err := c.poll(ctx, "every node knows every other", c.handshaken); err != nil {
		return err
	}
	for r := range c.Masters * c.Replicas {
		replica, master := c.Members[c.Masters+r], c.Members[r/c.Replicas]
		if _, err := c.Do(ctx, replica, "CLUSTER", "REPLICATE", master.ID); err != nil {
			return err
		}
	}
	return c.WaitReady(ctx)
}

// Do sends one command to m on a connection of its own, bounded by ctx.
func (c *Cluster) Do(ctx context.Context, m *Member, cmd string, args ...any) (any, error) {
	dial := c.Dial
	if dial == nil {
		dial = func(ctx context.Context, addr string) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr, redis.DialReadTimeout(5*time.Second),
				redis.DialWriteTimeout(5*time.Second))
		}
	}
	conn, err := dial(ctx, m.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Addr, err)
	}
	defer conn.Close()
	v, err := redis.DoContext(conn, ctx, cmd, args...)
	if err != nil {
		return nil, fmt.Errorf("%s %v on %s: %w", cmd, head(args), m.Addr, err)
	}
	return v, nil
}

// head is args, or their first three and "..." when there are more.
func head(args []any) []any {
	if len(args) > 3 {
		return append(slices.Clone(args[:3]), "...")
	}
	return args
}

// poll calls ready every 20ms until it reports true or ctx ends; the error
// then says what was awaited and what ready last said.
func (c *Cluster) poll(ctx context.Context, what string, ready func(context.Context) (bool, string)) error {
	for {
		ok, why := ready(ctx)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until %s: %w (%s)", what, ctx.Err(), why)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SetDead marks m killed (true) or back (false): the checks leave the dead
// out.
func (c *Cluster) SetDead(m *Member, dead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead == nil {
		c.dead = map[*Member]bool{}
	}
	if dead {
		c.dead[m] = true
	} else {
		delete(c.dead, m)
	}
}

// Live returns the members not killed, in order.
func (c *Cluster) Live() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Member
	for _, m := range c.Members {
		if m != nil && !c.dead[m] {
			out = append(out, m)
		}
	}
	return out
}
