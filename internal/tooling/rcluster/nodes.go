package rcluster

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/gomodule/redigo/redis"
)

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
