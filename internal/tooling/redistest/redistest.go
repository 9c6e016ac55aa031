// Package redistest gives tests real redis-server processes on loopback. It
// fails the test with an install hint where redis-server is missing: tests of
// a Redis lock against a mock prove nothing.
package redistest

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redisproc"
)

// Server is a running redis-server with a pool on it.
type Server struct {
	*redisproc.Server
	Pool *redis.Pool
}

// Start starts n redis-server processes and stops them when the test ends.
func Start(tb testing.TB, n int) []*Server {
	tb.Helper()
	out := make([]*Server, 0, n)
	for i := 0; i < n; i++ {
		p, err := redisproc.Start(redisproc.Options{})
		if err != nil {
			tb.Fatalf("starting redis-server %d of %d: %v", i+1, n, err)
		}
		s := &Server{Server: p, Pool: newPool(p.Addr)}
		tb.Cleanup(func() {
			s.Pool.Close()
			p.Stop()
		})
		out = append(out, s)
	}
	return out
}

// StartOne starts one redis-server process.
func StartOne(tb testing.TB) *Server {
	tb.Helper()
	return Start(tb, 1)[0]
}

// Do runs one command on s through a fresh connection, failing the test on
// error.
func (s *Server) Do(tb testing.TB, cmd string, args ...any) any {
	tb.Helper()
	c := s.Pool.Get()
	defer c.Close()
	v, err := c.Do(cmd, args...)
	if err != nil {
		tb.Fatalf("%s %v on %s: %v", cmd, args, s.Addr, err)
	}
	return v
}

func newPool(addr string) *redis.Pool { return locklab.NewPool(addr) }

// ACLUser creates the ACL user name with password and every permission on
// s, and returns name.
func (s *Server) ACLUser(tb testing.TB, name, password string) string {
	tb.Helper()
	s.Do(tb, "ACL", "SETUSER", name, "on", ">"+password, "~*", "&*", "+@all")
	return name
}

// StartReplica starts a redis-server replicating master (--replicaof) and
// waits until its link is up, it has the master's data and it acknowledges
// writes to WAIT; it stops when the test ends.
func StartReplica(tb testing.TB, master *Server) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(master.Addr)
	if err != nil {
		tb.Fatalf("master address %q: %v", master.Addr, err)
	}
	master.Do(tb, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
	p, err := redisproc.Start(redisproc.Options{Args: []string{"--replicaof", host, port}})
	if err != nil {
		tb.Fatalf("starting a replica of %s: %v", master.Addr, err)
	}
	s := &Server{Server: p, Pool: locklab.NewPool(p.Addr)}
	tb.Cleanup(func() {
		s.Pool.Close()
		p.Stop()
	})
	// Synced on both sides: the replica has loaded the master's data, and
	// the master counts it online, which it does only at the replica's
	// first acknowledgement (up to a second later). A WAIT before that
	// counts no replica.
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := redis.String(s.Do(tb, "INFO", "replication"), nil)
		minfo, _ := redis.String(master.Do(tb, "INFO", "replication"), nil)
		if strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") &&
			strings.Contains(minfo, "port="+strconv.Itoa(p.Port)+",state=online") {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("replica %s of %s did not sync within 10s:\n%s\nthe master says:\n%s", p.Addr, master.Addr, info, minfo)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// And the acknowledgement path works end to end: a write on the master
	// is acknowledged to a WAIT, three times running, before the tests'
	// own WAITs with their short timeouts.
	c := master.Pool.Get()
	defer c.Close()
	for acked := 0; acked < 3; {
		if _, err := c.Do("SET", "locklab:redistest:replica", acked); err != nil {
			tb.Fatalf("write on %s: %v", master.Addr, err)
		}
		if n, _ := redis.Int(c.Do("WAIT", 1, 100)); n >= 1 {
			acked++
		} else {
			acked = 0
		}
		if time.Now().After(deadline) {
			tb.Fatalf("replica %s of %s did not acknowledge a WAIT within 10s", p.Addr, master.Addr)
		}
	}
	if _, err := c.Do("DEL", "locklab:redistest:replica"); err != nil {
		tb.Fatalf("DEL on %s: %v", master.Addr, err)
	}
	return s
}

// Replicas is how many replicas master counts as connected.
func Replicas(tb testing.TB, master *Server) int {
	tb.Helper()
	info, _ := redis.String(master.Do(tb, "INFO", "replication"), nil)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
