package rcluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
)

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
