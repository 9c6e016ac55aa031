// pg: a run of a PostgreSQL strategy (pg-lock-table, pg-for-update,
// pg-advisory) on a PostgreSQL server (Options.PG), each client
// incarnation with a connection pool of its own.

package stress

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/internal/tooling/pgproc"
	"github.com/locklab/locklab/lockkit"
)

// pgFamily is the family of the strategies that lock on PostgreSQL
// (strategies/pglock.Family; the package is not imported here, a program
// registers it).
const pgFamily = "postgres"

// PGFaultKinds are the node faults of a run on PostgreSQL (Options.PG):
// node.Pause (the postmaster and every backend stopped with SIGSTOP, then
// continued), node.RestartKeep (the postmaster killed with SIGKILL, then
// started again on its data directory: every session ends, and its
// session locks and open transaction with it; committed rows stay) and
// node.Partition (the clients' connections cut at a loopback proxy: the
// server ends their sessions, while the clients hear nothing until it
// heals).
var PGFaultKinds = []node.Fault{node.Pause, node.RestartKeep, node.Partition}

// pgRun is the run's side of a PostgreSQL server: with a partition among
// the faults, the loopback proxy the clients reach it through, which the
// partition cuts.
type pgRun struct {
	s     *pgproc.Server
	proxy *node.Proxy
}

// startPG puts a proxy in front of the server when a partition may cut
// the clients off from it.
func startPG(o *Options) (*pgRun, error) {
	p := &pgRun{s: o.PG}
	if slices.Contains(o.Faults, node.Partition) {
		var err error
		if p.proxy, err = node.NewProxy(net.JoinHostPort(o.PG.Host, strconv.Itoa(o.PG.Port))); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// dsn is the DSN a client connects with: the server's, or the proxy's
// when there is one.
func (p *pgRun) dsn() string {
	if p.proxy == nil {
		return p.s.DSN()
	}
	u, err := url.Parse(p.s.DSN())
	if err != nil {
		return p.s.DSN()
	}
	u.Host = p.proxy.Addr()
	return u.String()
}

func (p *pgRun) close() {
	if p.proxy != nil {
		p.proxy.Close()
	}
}

// checkPG refuses a PostgreSQL strategy without a server, a server with
// any other strategy, and node faults other than PGFaultKinds.
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
	for _, f := range o.Faults {
		if !slices.Contains(PGFaultKinds, f) {
			return lockkit.Invalid("stress: node fault %v is not one a run on PostgreSQL injects (want %s)", f, node.JoinFaults(PGFaultKinds))
		}
	}
	return nil
}

// pool is a new connection pool on the server for one client
// incarnation, through the proxy if there is one, whose every statement
// may crash it (cr): once it has crashed, it opens no connection and
// lends none it has.
func (p *pgRun) pool(ctx context.Context, cr *crasher) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(p.s.DSN())
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
		if p.proxy != nil {
			addr = p.proxy.Addr()
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

// pgFault strikes the run's PostgreSQL server with kind for FaultFor, then
// heals it: a pause is followed by SIGCONT, a kill by a start on the same
// data directory. A fault in progress is always healed, even when ctx ends
// meanwhile.
func (r *recorder) pgFault(ctx context.Context, kind node.Fault) {
	bg := context.WithoutCancel(ctx)
	s := r.o.PG
	name := "postgres " + net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	f := NodeFault{Kind: kind, Node: name, At: r.now()}
	var begin, end func() error
	var what string
	switch kind {
	case node.Pause:
		begin, end = s.Stop, s.Cont
		what = fmt.Sprintf("paused (SIGSTOP to the postmaster and every backend) for %v", r.o.FaultFor)
	case node.Partition:
		if pr := r.pg.proxy; pr != nil {
			begin = func() error { pr.Cut(); return nil }
			end = func() error { pr.Heal(); return nil }
		}
		what = fmt.Sprintf("cut off from the clients for %v: the server ends their sessions, and they hear nothing until it heals", r.o.FaultFor)
	case node.RestartKeep:
		begin = func() error { s.KillPostmaster(); return nil }
		end = func() error { return s.Restart(bg) }
		what = fmt.Sprintf("killed (SIGKILL) for %v, then started again on its data directory: every session ends", r.o.FaultFor)
	}
	if begin == nil {
		begin = func() error { return fmt.Errorf("node fault %v on PostgreSQL: %w", kind, node.ErrUnsupported) }
	}
	r.mu.Lock()
	r.event(NodeFaultClient, name+" "+what)
	r.mu.Unlock()
	r.faulting.Store(true)
	err := begin()
	if err == nil {
		select {
		case <-ctx.Done():
		case <-time.After(r.o.FaultFor):
		}
		err = end()
	}
	r.faultEnded.Store(int64(r.now()))
	r.faulting.Store(false)
	f.For = r.now() - f.At
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		f.Err = err.Error()
		r.event(NodeFaultClient, fmt.Sprintf("%s: %s failed: %v", name, kind, err))
	} else {
		r.event(NodeFaultClient, fmt.Sprintf("%s back after %v", name, f.For.Round(time.Millisecond)))
	}
	r.nfaults = append(r.nfaults, f)
}
