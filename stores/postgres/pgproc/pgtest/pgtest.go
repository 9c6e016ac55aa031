// Package pgtest gives tests throwaway PostgreSQL servers (pgproc) that
// close when the test ends. It fails the test with an install hint where
// the server binaries are missing: a lock tested against no server proves
// nothing.
package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab/stores/postgres/pgproc"
)

// startTimeout bounds a server's start, initdb included.
const startTimeout = 2 * time.Minute

// Start starts a server with opts; it is closed when the test ends.
func Start(tb testing.TB, opts pgproc.Options) *pgproc.Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := pgproc.Start(ctx, opts)
	if err != nil {
		tb.Fatalf("starting postgres: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// StartStandby starts a streaming standby of primary; it is closed when
// the test ends.
func StartStandby(tb testing.TB, primary *pgproc.Server, opts pgproc.Options) *pgproc.Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := primary.StartStandby(ctx, opts)
	if err != nil {
		tb.Fatalf("starting a standby of postgres on port %d: %v", primary.Port, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Pool opens a pgx pool on s, with params (such as "pool_max_conns=30")
// added to its DSN; it is closed when the test ends.
func Pool(tb testing.TB, s *pgproc.Server, params ...string) *pgxpool.Pool {
	tb.Helper()
	dsn := s.DSN()
	for _, p := range params {
		dsn += "&" + p
	}
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		tb.Fatalf("pool on %s: %v", dsn, err)
	}
	tb.Cleanup(p.Close)
	return p
}
