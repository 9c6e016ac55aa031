// The connection audit: what the servers themselves count of the
// connections they accepted, set against the connections the harness
// opened, each of which says whose it is (redisnode.ClientName).

package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/audit"
	"github.com/locklab/locklab/stores/redis/redisnode"
)

// startAudit watches the Redis servers behind nodes (both of a master
// and replica pair) for connections that no client of the harness
// opened: the store's Driver.Audit. A lock that talks to a server through
// a client of its own beside the connections its factory was given (a
// second pool, a connection it dials for its release, a client kept in a
// global) sends commands that the harness never schedules: its cells
// would read safe having explored none of the interleavings of those
// commands.
//
// Two counts of the servers' own catch such a client:
//   - every connection the server accepted (INFO stats'
//     total_connections_received) was named by the harness (INFO
//     commandstats' CLIENT SETNAME calls) or was a replica's link (PSYNC,
//     SYNC); a server restarted in between starts its counts again, and
//     only the count below applies to it;
//   - at the end, no connection still open (CLIENT LIST) is unnamed, or
//     named otherwise, but a replica's or a master's link.
//
// The counts at the start are needed, not zero: a server counts from its
// own start, and the harness's probes of it (the PING that waits for it
// to come up, again after a fault) connect without a name. Reading them
// costs one INFO on each server.
//
// The audit needs servers the harness owns: on servers that others use
// too (the addrs backend) their connections would count, and it checks
// nothing there.
func startAudit(ctx context.Context, nodes []harness.Node) (func(context.Context) error, error) {
	a := &serversAudit{}
	for _, n := range nodes {
		if isShared(n) {
			return func(context.Context) error { return nil }, nil
		}
		members := []harness.Node{n}
		if r, ok := n.(*redisnode.Replicated); ok {
			members = members[:0]
			for _, m := range r.Members() {
				members = append(members, m)
			}
		}
		for _, m := range members {
			o := poolOptions(m)
			s := audited{Server: audit.Server{Name: m.Name(), Addr: o.Addr}, o: o}
			var err error
			if s.first, _, err = s.read(ctx, false); err != nil {
				return nil, err
			}
			a.servers = append(a.servers, s)
		}
	}
	return a.check, nil
}

// serversAudit is the servers' counts at the start.
type serversAudit struct {
	servers []audited
}

type audited struct {
	audit.Server
	o     locklab.PoolOptions
	first counts
}

// counts are one server's counts at one moment.
type counts struct {
	runID                     string
	accepted, named, replicas int64
}

// check reads the counts again and returns an error naming every server
// that accepted a connection the harness did not open since the start,
// or holds one open now.
func (a *serversAudit) check(ctx context.Context) error {
	var errs []error
	for _, s := range a.servers {
		now, open, err := s.read(ctx, true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var said []string
		if now.runID == s.first.runID {
			if n := (now.accepted - s.first.accepted) - (now.named - s.first.named) - (now.replicas - s.first.replicas); n > 0 {
				said = append(said, audit.NotOpened("accepted", int(n), "connection", nil))
			}
		}
		if len(open) > 0 {
			said = append(said, audit.Open(open))
		}
		if err := s.Found(said...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// read reads the server's counts, and with list the connections open on
// it that are neither the harness's nor a replication link.
func (s audited) read(ctx context.Context, list bool) (counts, []string, error) {
	var c counts
	p, err := locklab.NewPoolOptions(s.o)
	if err != nil {
		return c, nil, err
	}
	defer p.Close()
	conn, err := p.GetContext(ctx)
	if err != nil {
		return c, nil, s.Unread("", err)
	}
	defer conn.Close()
	info, err := redis.String(redis.DoContext(conn, ctx, "INFO", "everything"))
	if err != nil {
		return c, nil, s.Unread("INFO", err)
	}
	c = parseCounts(info)
	if !list {
		return c, nil, nil
	}
	clients, err := redis.String(redis.DoContext(conn, ctx, "CLIENT", "LIST"))
	if err != nil {
		return c, nil, s.Unread("CLIENT LIST", err)
	}
	return c, strangers(clients), nil
}

// parseCounts reads the run id, the connections accepted, the CLIENT
// SETNAME calls and the replicas' syncs from an INFO reply.
func parseCounts(info string) counts {
	var c counts
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "run_id":
			c.runID = v
		case "total_connections_received":
			c.accepted, _ = strconv.ParseInt(v, 10, 64)
		case "cmdstat_client|setname":
			c.named += calls(v)
		case "cmdstat_psync", "cmdstat_sync":
			c.replicas += calls(v)
		}
	}
	return c
}

// calls reads "calls=N" from a commandstats value.
func calls(v string) int64 {
	n, _ := strconv.ParseInt(audit.Fields(v, ",")["calls"], 10, 64)
	return n
}

// strangers returns, from a CLIENT LIST reply, the connections that are
// neither named redisnode.ClientName nor a replication link (flag S: a
// replica's; M: its master's), each as its address, name and last command.
func strangers(list string) []string {
	var out []string
	for line := range strings.Lines(list) {
		f := audit.Fields(line, "")
		if f["addr"] == "" || f["name"] == redisnode.ClientName || strings.ContainsAny(f["flags"], "SM") {
			continue
		}
		out = append(out, fmt.Sprintf("%s name=%q cmd=%s", f["addr"], f["name"], f["cmd"]))
	}
	return out
}
