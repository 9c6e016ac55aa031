// Package counting wraps a connection source and counts the commands sent
// through it (each command of a pipeline counts), so tests and benchmarks
// can report Redis commands per cycle.
package counting

import (
	"context"
	"sync/atomic"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/wrapconn"
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
	w := wrapconn.Source{Src: s.Src, Open: s.open}
	return w.GetContext(ctx)
}

func (s *Source) open(context.Context) (wrapconn.Hooks, error) {
	return wrapconn.Hooks{Do: s.count}, nil
}

func (s *Source) count(ctx context.Context, call wrapconn.Call, send wrapconn.Send) (any, error) {
	s.counter().Add(int64(call.Commands()))
	return send(ctx)
}
