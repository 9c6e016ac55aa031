// Package redistest gives tests real redis-server processes on loopback. It
// fails the test with an install hint where redis-server is missing: tests of
// a Redis lock against a mock prove nothing.
package redistest

import (
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/redisproc"
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
