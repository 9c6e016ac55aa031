// pg: a run of a PostgreSQL strategy (pg-lock-table, pg-for-update,
// pg-advisory) on a PostgreSQL server (Options.PG), each client
// incarnation with a connection pool of its own.

package stress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/lockkit"
	"github.com/locklab/locklab/stores/postgres/pgproc"
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
// heals) and node.Kill (every client's session killed, as an operator's
// pg_terminate_backend would: the sessions end, with their session locks
// and open transactions, while the server runs on and the clients'
// next statements find them gone) and node.Failover (the primary killed,
// its asynchronous streaming standby promoted, the clients' address moved
// to it at the proxy: sessions and unreplayed rows are lost).
var PGFaultKinds = []node.Fault{node.Pause, node.RestartKeep, node.Partition, node.Kill, node.Failover}

// pgRun is the run's side of a PostgreSQL server: with a partition among
// the faults, the loopback proxy the clients reach it through, which the
// partition cuts.
type pgRun struct {
	s     *pgproc.Server
	proxy *node.Proxy

	// With failovers among the faults: primary is the server the clients
	// reach now (s until the first failover), standby the asynchronous
	// standby the next failover promotes (nil while none is ready), and
	// started the servers the run started, which close closes.
	mu      sync.Mutex
	primary *pgproc.Server
	standby *pgproc.Server
	started []*pgproc.Server
}

// standbyStart bounds the start of a standby (pg_basebackup and its
// first replay).
const standbyStart = time.Minute

// startPG puts a proxy in front of the server when a partition may cut
// the clients off from it, or a failover move the primary; for a
// failover it starts the first standby.
func startPG(o *Options) (*pgRun, error) {
	p := &pgRun{s: o.PG, primary: o.PG}
	if slices.Contains(o.Faults, node.Partition) || slices.Contains(o.Faults, node.Failover) {
		var err error
		if p.proxy, err = node.NewProxy(pgAddr(o.PG)); err != nil {
			return nil, err
		}
	}
	if slices.Contains(o.Faults, node.Failover) {
		ctx, cancel := context.WithTimeout(context.Background(), standbyStart)
		defer cancel()
		sb, err := o.PG.StartStandby(ctx, pgproc.Options{})
		if err != nil {
			p.close()
			return nil, fmt.Errorf("stress: starting the standby a failover promotes: %w", err)
		}
		p.standby, p.started = sb, append(p.started, sb)
	}
	return p, nil
}

// pgAddr is s's "host:port".
func pgAddr(s *pgproc.Server) string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// failover kills the primary (SIGKILL), promotes the standby and sends
// the clients' new connections to it: the address moves with the
// primary, and every session ends. The rows the standby had not replayed
// are lost with the old primary.
func (p *pgRun) failover(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.standby == nil {
		return errors.New("no standby is ready to promote (the last failover's replacement is still starting)")
	}
	old, sb := p.primary, p.standby
	old.KillPostmaster()
	if err := sb.Promote(ctx); err != nil {
		return err
	}
	p.proxy.Retarget(pgAddr(sb))
	p.primary, p.standby = sb, nil
	return nil
}

// replaceStandby starts a standby of the primary for the next failover.
func (p *pgRun) replaceStandby(ctx context.Context) error {
	p.mu.Lock()
	primary := p.primary
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, standbyStart)
	defer cancel()
	sb, err := primary.StartStandby(ctx, pgproc.Options{})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.standby, p.started = sb, append(p.started, sb)
	p.mu.Unlock()
	return nil
}

// current is the primary the clients reach now.
func (p *pgRun) current() *pgproc.Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primary
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
	p.mu.Lock()
	started := p.started
	p.started = nil
	p.mu.Unlock()
	for _, s := range started {
		s.Close()
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
	s := r.pg.current()
	name := "postgres " + pgAddr(s)
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
	case node.Failover:
		begin = func() error { return r.pg.failover(bg) }
		end = func() error { return r.pg.replaceStandby(bg) }
		what = "failed over: the primary killed (SIGKILL), its asynchronous standby promoted and the clients' new " +
			"connections sent to it; every session ends, and what the standby had not replayed is lost; a new " +
			"standby starts once the fault's time is up"
	case node.Kill:
		begin = func() error { return terminateSessions(bg, s) }
		end = func() error { return nil }
		what = "had every client session killed (pg_terminate_backend): their locks end with them, the server runs on"
	case node.RestartKeep:
		begin = func() error { s.KillPostmaster(); return nil }
		end = func() error { return s.Restart(bg) }
		what = fmt.Sprintf("killed (SIGKILL) for %v, then started again on its data directory: every session ends", r.o.FaultFor)
	}
	if begin == nil {
		begin = func() error { return fmt.Errorf("node fault %v on PostgreSQL: %w", kind, node.ErrUnsupported) }
	}
	r.strike(ctx, kind, name, name, what, begin, end)
}

// terminateSessions ends every client session on s but its own, with
// pg_terminate_backend, and waits until those are gone (sessions opened
// meanwhile live on).
func terminateSessions(ctx context.Context, s *pgproc.Server) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The sessions are listed first and ended in a second statement: in
	// one, nothing orders the WHERE clause's tests, and this session
	// could end itself.
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`)
	if err != nil {
		return err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(p) FROM unnest($1::int[]) AS p`, pids); err != nil {
		return err
	}
	for {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
