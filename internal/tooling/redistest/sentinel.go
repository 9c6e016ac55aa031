package redistest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/internal/tooling/redisproc"
)

// SentinelGroup is a master, its replicas and the Sentinels that watch it,
// all redis-server processes.
type SentinelGroup struct {
	Name      string
	Master    *Server
	Replicas  []*Server
	Sentinels []*Server
}

// StartSentinelGroup starts a master named name with two replicas and three
// Sentinels watching it (quorum 2, down-after-milliseconds 1000), waits
// until the replicas are in sync and every Sentinel knows them, and stops
// everything when the test ends.
func StartSentinelGroup(tb testing.TB, name string) *SentinelGroup {
	tb.Helper()
	g := &SentinelGroup{Name: name, Master: StartOne(tb)}
	host, port := "127.0.0.1", strconv.Itoa(g.Master.Port)
	for range 2 {
		r := startWith(tb, redisproc.Options{Args: []string{"--replicaof", host, port}})
		g.Replicas = append(g.Replicas, r)
	}
	for range 3 {
		s := startWith(tb, redisproc.Options{Sentinel: true})
		s.Do(tb, "SENTINEL", "MONITOR", name, host, port, 2)
		s.Do(tb, "SENTINEL", "SET", name, "down-after-milliseconds", 1000, "failover-timeout", 3000)
		g.Sentinels = append(g.Sentinels, s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !g.ready(tb) {
		if time.Now().After(deadline) {
			tb.Fatalf("Sentinel group %s not ready within 30s", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return g
}

func startWith(tb testing.TB, o redisproc.Options) *Server {
	tb.Helper()
	p, err := redisproc.Start(o)
	if err != nil {
		tb.Fatalf("starting redis-server: %v", err)
	}
	s := &Server{Server: p, Pool: newPool(p.Addr)}
	tb.Cleanup(func() {
		s.Pool.Close()
		p.Stop()
	})
	return s
}

// ready: the replicas' links are up and each Sentinel lists both replicas
// and the two other Sentinels.
func (g *SentinelGroup) ready(tb testing.TB) bool {
	for _, r := range g.Replicas {
		info, _ := redis.String(r.Do(tb, "INFO", "replication"), nil)
		if !strings.Contains(info, "master_link_status:up") {
			return false
		}
	}
	for _, s := range g.Sentinels {
		reps, _ := redis.Values(s.Do(tb, "SENTINEL", "REPLICAS", g.Name), nil)
		sens, _ := redis.Values(s.Do(tb, "SENTINEL", "SENTINELS", g.Name), nil)
		if len(reps) < len(g.Replicas) || len(sens) < len(g.Sentinels)-1 {
			return false
		}
	}
	return true
}

// SentinelAddrs are the Sentinels' "host:port".
func (g *SentinelGroup) SentinelAddrs() []string {
	var out []string
	for _, s := range g.Sentinels {
		out = append(out, s.Addr)
	}
	return out
}

// MasterAddr is the master's address as the first Sentinel that answers
// tells it.
func (g *SentinelGroup) MasterAddr(tb testing.TB) string {
	tb.Helper()
	for _, s := range g.Sentinels {
		c := s.Pool.Get()
		v, err := redis.Strings(c.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.Name))
		c.Close()
		if err == nil && len(v) == 2 {
			return v[0] + ":" + v[1]
		}
	}
	tb.Fatalf("no Sentinel tells the master of %s", g.Name)
	return ""
}

// Server returns the server of the group listening on addr, or nil.
func (g *SentinelGroup) Server(addr string) *Server {
	for _, s := range append([]*Server{g.Master}, g.Replicas...) {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}
