// Package rcluster forms a Redis Cluster out of running redis-servers
// started with --cluster-enabled yes, and watches it, through nothing but
// their addresses: whatever runs the servers (local processes, containers)
// hands their addresses here. It assigns the hash slots, introduces the
// nodes to each other, attaches the replicas, waits until the cluster is
// ready, and answers who serves what, before and after a failover.
// internal/tooling/redisproc (test clusters of processes) and harness/node (the
// harness's clusters on the process and docker backends) share it.
package rcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
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

// handshaken: every live node lists every live node, none of them still
// in handshake.
func (c *Cluster) handshaken(ctx context.Context) (bool, string) {
	live := c.Live()
	for _, m := range live {
		table, err := c.nodesOf(ctx, m)
		if err != nil {
			return false, err.Error()
		}
		for _, other := range live {
			e, ok := table[other.ID]
			if !ok || e.has("handshake") || e.has("noaddr") {
				return false, fmt.Sprintf("%s does not know %s yet", m.Addr, other.Addr)
			}
		}
	}
	return true, ""
}

// nodeEntry is one line of CLUSTER NODES.
type nodeEntry struct {
	id, addr, master string
	flags            []string
	slots            int
}

func (e nodeEntry) has(flag string) bool { return slices.Contains(e.flags, flag) }

// nodesOf reads CLUSTER NODES on m, by node id.
func (c *Cluster) nodesOf(ctx context.Context, m *Member) (map[string]nodeEntry, error) {
	text, err := redis.String(c.Do(ctx, m, "CLUSTER", "NODES"))
	if err != nil {
		return nil, err
	}
	return parseNodes(text), nil
}

// parseNodes reads the text of CLUSTER NODES: "<id> <ip:port@cport>
// <flags> <master> <ping> <pong> <epoch> <link> <slot>...".
func parseNodes(text string) map[string]nodeEntry {
	out := map[string]nodeEntry{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		e := nodeEntry{id: f[0], addr: f[1], master: f[3], flags: strings.Split(f[2], ",")}
		if i := strings.IndexByte(e.addr, '@'); i >= 0 {
			e.addr = e.addr[:i]
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil {
				e.slots += b - a + 1
			}
		}
		out[e.id] = e
	}
	return out
}

// Info reads one section of INFO on m as fields; section "cluster-info"
// reads CLUSTER INFO.
func (c *Cluster) Info(ctx context.Context, m *Member, section string) (map[string]string, error) {
	var (
		text string
		err  error
	)
	if section == "cluster-info" {
		text, err = redis.String(c.Do(ctx, m, "CLUSTER", "INFO"))
	} else {
		text, err = redis.String(c.Do(ctx, m, "INFO", section))
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// WaitReady waits until the live nodes form a healthy cluster: each says
// cluster_state:ok with every slot served and agrees on who is master of
// whom; each replica's link to its master is up and synced, and each master
// counts its replicas online (so WAIT counts them). Killed nodes are left
// out; a cluster missing a master with no replica to replace it never gets
// ready.
func (c *Cluster) WaitReady(ctx context.Context) error {
	return c.poll(ctx, "the cluster is ready", c.ready)
}

func (c *Cluster) ready(ctx context.Context) (bool, string) {
	live := c.Live()
	var view map[string]nodeEntry
	for _, m := range live {
		ci, err := c.Info(ctx, m, "cluster-info")
		if err != nil {
			return false, err.Error()
		}
		if ci["cluster_state"] != "ok" || ci["cluster_slots_ok"] != strconv.Itoa(Slots) {
			return false, fmt.Sprintf("%s: cluster_state:%s cluster_slots_ok:%s", m.Addr, ci["cluster_state"], ci["cluster_slots_ok"])
		}
		table, err := c.nodesOf(ctx, m)
		if err != nil {
			return false, err.Error()
		}
		for _, other := range live {
			e := table[other.ID]
			if !e.has("master") && !e.has("slave") || e.has("fail") || e.has("fail?") {
				return false, fmt.Sprintf("%s sees %s as %v", m.Addr, other.Addr, e.flags)
			}
		}
		if view == nil {
			view = table
			continue
		}
		for _, other := range live {
			if view[other.ID].master != table[other.ID].master {
				return false, fmt.Sprintf("%s and %s disagree on the role of %s", live[0].Addr, m.Addr, other.Addr)
			}
		}
	}
	for _, m := range live {
		e := view[m.ID]
		if !e.has("slave") {
			continue
		}
		ri, err := c.Info(ctx, m, "replication")
		if err != nil {
			return false, err.Error()
		}
		if ri["master_link_status"] != "up" || ri["master_sync_in_progress"] != "0" {
			return false, fmt.Sprintf("replica %s: master_link_status:%s master_sync_in_progress:%s", m.Addr, ri["master_link_status"], ri["master_sync_in_progress"])
		}
		master := c.ByID(e.master)
		if master == nil {
			return false, fmt.Sprintf("replica %s follows an unknown node %s", m.Addr, e.master)
		}
		mi, err := c.Info(ctx, master, "replication")
		if err != nil {
			return false, err.Error()
		}
		host, port, _ := net.SplitHostPort(m.Addr)
		online := false
		for k, v := range mi {
			if strings.HasPrefix(k, "slave") && strings.Contains(v, "ip="+host+",port="+port+",") && strings.Contains(v, "state=online") {
				online = true
			}
		}
		if !online {
			return false, fmt.Sprintf("master %s does not count replica %s online", master.Addr, m.Addr)
		}
	}
	return true, ""
}

// ByID returns the member of cluster id id, or nil.
func (c *Cluster) ByID(id string) *Member {
	for _, m := range c.Members {
		if m != nil && m.ID == id {
			return m
		}
	}
	return nil
}

// Roles tells the current masters, in slot order, and the replicas of
// each, as the first live node that answers sees them.
func (c *Cluster) Roles(ctx context.Context) (masters []*Member, replicas map[*Member][]*Member, err error) {
	for _, m := range c.Live() {
		table, err := c.nodesOf(ctx, m)
		if err != nil {
			continue
		}
		replicas = map[*Member][]*Member{}
		for _, other := range c.Live() {
			e := table[other.ID]
			switch {
			case e.has("master") && e.slots > 0:
				masters = append(masters, other)
			case e.has("slave"):
				if mm := c.ByID(e.master); mm != nil {
					replicas[mm] = append(replicas[mm], other)
				}
			}
		}
		return masters, replicas, nil
	}
	return nil, nil, errors.New("no node of the cluster answers")
}

// MasterOf returns the live member that serves slot as master, as CLUSTER
// SLOTS on the first live node that answers tells.
func (c *Cluster) MasterOf(ctx context.Context, slot int) (*Member, error) {
	for _, m := range c.Live() {
		v, err := redis.Values(c.Do(ctx, m, "CLUSTER", "SLOTS"))
		if err != nil {
			continue
		}
		for _, r := range v {
			f, err := redis.Values(r, nil)
			if err != nil || len(f) < 3 {
				continue
			}
			lo, _ := redis.Int(f[0], nil)
			hi, _ := redis.Int(f[1], nil)
			if slot < lo || slot > hi {
				continue
			}
			mf, err := redis.Values(f[2], nil)
			if err != nil || len(mf) < 2 {
				break
			}
			host, _ := redis.String(mf[0], nil)
			port, _ := redis.Int(mf[1], nil)
			addr := net.JoinHostPort(host, strconv.Itoa(port))
			for _, cand := range c.Live() {
				if cand.Addr == addr {
					return cand, nil
				}
			}
		}
		return nil, fmt.Errorf("no live node serves slot %d", slot)
	}
	return nil, errors.New("no node of the cluster answers")
}

// KeySlot asks a live node for key's hash slot (CLUSTER KEYSLOT).
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	for _, m := range c.Live() {
		if v, err := redis.Int(c.Do(ctx, m, "CLUSTER", "KEYSLOT", key)); err == nil {
			return v, nil
		}
	}
	return 0, errors.New("no node of the cluster answers")
}

// FlushAll deletes every key on every master (FLUSHALL).
func (c *Cluster) FlushAll(ctx context.Context) error {
	masters, _, err := c.Roles(ctx)
	if err != nil {
		return err
	}
	for _, m := range masters {
		if _, err := c.Do(ctx, m, "FLUSHALL"); err != nil {
			return err
		}
	}
	return nil
}

// WaitPromoted waits until one of candidates (the replicas of a master
// that was killed) says it is a master serving slots, and returns it.
func (c *Cluster) WaitPromoted(ctx context.Context, candidates []*Member) (*Member, error) {
	var promoted *Member
	err := c.poll(ctx, "a replica takes over", func(ctx context.Context) (bool, string) {
		for _, r := range candidates {
			table, err := c.nodesOf(ctx, r)
			if err != nil {
				return false, err.Error()
			}
			if e := table[r.ID]; e.has("master") && e.slots > 0 {
				promoted = r
				return true, ""
			}
		}
		return false, "no replica is master yet"
	})
	return promoted, err
}

// IsReplica reports whether m says it is a replica (CLUSTER NODES, its own
// line).
func (c *Cluster) IsReplica(ctx context.Context, m *Member) (bool, error) {
	table, err := c.nodesOf(ctx, m)
	if err != nil {
		return false, err
	}
	return table[m.ID].has("slave"), nil
}

// State is what every live node says of the cluster (CLUSTER NODES), for
// an error message.
func (c *Cluster) State() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	for _, m := range c.Live() {
		fmt.Fprintf(&b, "node %s:\n", m.Addr)
		if text, err := redis.String(c.Do(ctx, m, "CLUSTER", "NODES")); err == nil {
			b.WriteString(text)
		} else {
			fmt.Fprintf(&b, "  %v\n", err)
		}
	}
	return b.String()
}
