// Package counting wraps a connection source and counts the commands sent
// through it, so tests and benchmarks can report Redis commands per cycle.
package counting

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
)

// Source counts the commands sent on the connections it hands out, in
// Count when it is set (so several sources can share one counter), else in
// its own counter.
type Source struct {
	Src   locklab.ConnSource
	Count *atomic.Int64
	n     atomic.Int64
}

func (s *Source) counter() *atomic.Int64 {
	if s.Count != nil {
		return s.Count
	}
	return &s.n
}

// Commands returns the number of commands sent so far.
func (s *Source) Commands() int64 { return s.counter().Load() }

// GetContext returns a counting connection from the wrapped source.
func (s *Source) GetContext(ctx context.Context) (redis.Conn, error) {
	c, err := s.Src.GetContext(ctx)
	if err != nil {
		return c, err
	}
	return conn{c, s.counter()}, nil
}

type conn struct {
	redis.Conn
	n *atomic.Int64
}

func (c conn) Do(cmd string, args ...any) (any, error) {
	c.n.Add(1)
	return c.Conn.Do(cmd, args...)
}

func (c conn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	c.n.Add(1)
	return redis.DoContext(c.Conn, ctx, cmd, args...)
}

func (c conn) ReceiveContext(ctx context.Context) (any, error) {
	return redis.ReceiveContext(c.Conn, ctx)
}

func (c conn) DoWithTimeout(timeout time.Duration, cmd string, args ...any) (any, error) {
	c.n.Add(1)
	return redis.DoWithTimeout(c.Conn, timeout, cmd, args...)
}

func (c conn) ReceiveWithTimeout(timeout time.Duration) (any, error) {
	return redis.ReceiveWithTimeout(c.Conn, timeout)
}
