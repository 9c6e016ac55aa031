package pglock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
)

// session is a held lease's connection, and ForUpdate's open transaction.
type session struct {
	key  string
	conn *pgxpool.Conn
	tx   pgx.Tx // ForUpdate only
	id   int64  // Advisory only
}

// sessions are the leases a session strategy holds, by token.
type sessions struct {
	mu   sync.Mutex
	held map[string]*session
}

func (s *sessions) put(token string, h *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[string]*session{}
	}
	s.held[token] = h
}

// take removes and returns the session of lease, or nil when the lease is
// not one this Locker holds.
func (s *sessions) take(lease locklab.Lease) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[lease.Token]
	if h == nil || h.key != lease.Key {
		return nil
	}
	delete(s.held, lease.Token)
	return h
}

// backend returns the server process id of lease's session.
func (s *sessions) backend(lease locklab.Lease) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[lease.Token]
	if h == nil || h.key != lease.Key {
		return 0, false
	}
	return h.conn.Conn().PgConn().PID(), true
}

// closeAll closes every held session's connection without releasing.
func (s *sessions) closeAll() {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	for _, h := range held {
		discard(h.conn)
	}
}

// discard closes c, ending its session and every lock the session holds,
// and gives it back to the pool, which drops it.
func discard(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Conn().Close(ctx)
	c.Release()
}

// lost is Release's error when the session's statement failed: with ctx
// ended, ErrUnavailable; else ErrNotHeld, for the session is gone (the
// server ended it, or the connection broke and the server ends it when it
// notices): the lock is not the caller's any more.
func lost(ctx context.Context, key string, err error) error {
	if ctx.Err() != nil {
		return unavailable(ctx, err)
	}
	return fmt.Errorf("%w: the session holding it failed: %w", single.NotHeld(key), err)
}
