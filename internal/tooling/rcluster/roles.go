package rcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

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
