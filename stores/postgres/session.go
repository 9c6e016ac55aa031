// The clients' sessions: the socket that sees a session end, and the
// store's wait for the server to end the sessions it closed.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores/postgres/pgproc"
)

// pgSocket is a client's connection to the server. Closing it returns
// once the server has ended its session: a strategy that closes a
// session to free what it holds (pglock's discard) has freed it before
// the schedule's next step, rather than at some point of the next steps.
//
// It closes synchronously, as PostgreSQL's own socket_close allows: it
// shuts its side of the connection down and reads until the server
// closes the other, which a backend does only when its process exits,
// after it has released its locks and left pg_stat_activity. That costs
// the server no query, nor the store a poll; only where the end of the
// connection cannot be read (no half-close, a timeout) does it poll
// pg_stat_activity (waitEnded).
type pgSocket struct {
	net.Conn
	s *pgStore
	// server is the server the connection reached: the node's primary
	// when it was made.
	server *pgproc.Server
	pid    atomic.Uint32
	once   sync.Once
	// value is what the statement running on the connection returned
	// (pgValue), read by the tracer on the connection's goroutine.
	value pgValue
	// lose: the answer of the statement under way is lost (lost.go);
	// in, pass, cut and lostTag are readLosing's, on the connection's
	// goroutine.
	lose    atomic.Bool
	in      []byte
	pass    []byte
	cut     bool
	lostTag string
}

// Read reads the server's answers, losing the one a lose step said to.
func (c *pgSocket) Read(b []byte) (int, error) {
	if c.lose.Load() {
		return c.readLosing(b)
	}
	return c.Conn.Read(b)
}

func (c *pgSocket) Close() error {
	var err error
	c.once.Do(func() {
		// A session of a server that failed over died with it.
		pid := c.pid.Load()
		current := pid != 0 && c.server == c.s.node.Primary()
		deadline := time.Now().Add(10 * time.Second)
		if current && c.drain(deadline) {
			err = c.Conn.Close()
			c.s.sawEnd(pid)
			return
		}
		err = c.Conn.Close()
		if current {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			c.s.waitEnded(ctx, fmt.Sprintf("backend %d", pid), []uint32{pid})
		}
	})
	return err
}

// drain shuts the client's side of the connection down and reads what
// the server still sends until it closes its side: its backend's
// process has exited. It reports whether it saw that end by deadline.
func (c *pgSocket) drain(deadline time.Time) bool {
	hc, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || hc.CloseWrite() != nil {
		return false
	}
	if c.Conn.SetReadDeadline(deadline) != nil {
		return false
	}
	var buf [512]byte
	for {
		_, err := c.Conn.Read(buf[:])
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			return true
		default:
			return false
		}
	}
}

// discardConn closes conn, ending its session, and gives it back to its
// pool, which drops it.
func discardConn(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Conn().Close(ctx)
	conn.Release()
}

// disconnect closes client c's pool and every session of it, the held
// sessions among them (a strategy that holds sessions closes them:
// io.Closer), as the death of its process does, and waits until the
// server has ended them all, and so released their locks.
func (s *pgStore) disconnect(ctx context.Context, c *harness.Client) error {
	s.mu.Lock()
	pc := s.clients[c]
	delete(s.clients, c)
	s.mu.Unlock()
	if pc == nil {
		return nil
	}
	if cl, ok := c.Locker().(io.Closer); ok {
		cl.Close()
	}
	pc.pool.Close()
	return s.waitEnded(ctx, fmt.Sprintf("c%d", c.ID()), s.live(pc))
}

// sawEnd notes that backend pid's process has exited.
func (s *pgStore) sawEnd(pid uint32) {
	s.mu.Lock()
	s.gone[pid] = true
	s.mu.Unlock()
}

// waitEnded waits until none of the backends of who is left on the
// server: it asks the server about those whose end no socket saw.
func (s *pgStore) waitEnded(ctx context.Context, who string, backends []uint32) error {
	var pids []int32
	s.mu.Lock()
	for _, pid := range backends {
		if !s.gone[pid] {
			pids = append(pids, int32(pid))
		}
	}
	s.mu.Unlock()
	if len(pids) == 0 {
		return nil
	}
	for {
		var n int
		if err := s.admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", pids).Scan(&n); err != nil {
			return fmt.Errorf("waiting for the sessions of %s to end on %s: %w", who, s.node.Name(), err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}
