// pg: a run of a PostgreSQL strategy (pg-lock-table, pg-for-update,
// pg-advisory) on a PostgreSQL server (Options.PG), each client
// incarnation with a connection pool of its own.

package stress

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab/internal/tooling/pgproc"
	"github.com/locklab/locklab/lockkit"
)

// pgFamily is the family of the strategies that lock on PostgreSQL
// (strategies/pglock.Family; the package is not imported here, a program
// registers it).
const pgFamily = "postgres"

// checkPG refuses a PostgreSQL strategy without a server, a server with
// any other strategy, and what a run on PostgreSQL does not do yet: node
// faults and worker processes.
func (o *Options) checkPG() error {
	if (o.desc.Family == pgFamily) != (o.PG != nil) {
		if o.PG == nil {
			return lockkit.Invalid("stress: strategy %s locks on PostgreSQL: Options.PG is required", o.Strategy)
		}
		return lockkit.Invalid("stress: strategy %s does not lock on PostgreSQL", o.Strategy)
	}
	if o.PG == nil {
		return nil
	}
	if len(o.Faults) > 0 {
		return lockkit.Invalid("stress: a run on PostgreSQL injects no node fault yet")
	}
	if o.Processes {
		return lockkit.Invalid("stress: a run on PostgreSQL runs no worker processes yet")
	}
	return nil
}

// pgPool is a new connection pool on s for one client incarnation, whose
// every statement may crash it (cr): once it has crashed, it opens no
// connection and lends none it has.
func pgPool(ctx context.Context, s *pgproc.Server, cr *crasher) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(s.DSN())
	if err != nil {
		return nil, err
	}
	// A holder of pg-for-update or pg-advisory keeps a connection for its
	// lease; a waiter needs another.
	cfg.MaxConns = 4
	cfg.ConnConfig.Tracer = pgCrashTracer{cr}
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if cr.crashed.Load() {
			return nil, errCrashed
		}
		return dial(ctx, network, addr)
	}
	cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		if cr.crashed.Load() {
			return false, errCrashed
		}
		return true, nil
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// pgCrashTracer is the crasher's hook on a pool's statements: after each
// one the client may crash.
type pgCrashTracer struct{ cr *crasher }

func (t pgCrashTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (t pgCrashTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) { t.cr.roll() }
