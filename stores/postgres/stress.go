// PostgreSQL in stress mode (harness/stress): a run of a postgres-family
// strategy (pg-lock-table, pg-for-update, pg-advisory) on a server (a
// Node), each client incarnation with a connection pool of its own, and
// its node faults: the server paused, killed and restarted, cut off from
// the clients, its client sessions killed, or failed over to a standby.

package postgres

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

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/internal/tooling/tcpproxy"
	"github.com/locklab/locklab/stores/postgres/pgproc"
)

// StressFaults are the node faults of a stress run on PostgreSQL:
// fault.Pause (the postmaster and every backend stopped with SIGSTOP, then
// continued), fault.RestartKeep (the postmaster killed with SIGKILL, then
// started again on its data directory: every session ends, and its
// session locks and open transaction with it; committed rows stay) and
// fault.Partition (the clients' connections cut at a loopback proxy: the
// server ends their sessions, while the clients hear nothing until it
// heals) and fault.Kill (every client's session killed, as an operator's
// pg_terminate_backend would: the sessions end, with their session locks
// and open transactions, while the server runs on and the clients' next
// statements find them gone) and fault.Failover (the primary killed, its
// asynchronous streaming standby promoted, the clients' address moved to
// it at the proxy: sessions and unreplayed rows are lost).
var StressFaults = []fault.Fault{fault.Pause, fault.RestartKeep, fault.Partition, fault.Kill, fault.Failover}

// stressDriver is the store's part of stress mode (its Driver's Stress).
var stressDriver = &stress.StoreDriver{
	Servers: "a PostgreSQL server",
	Faults:  StressFaults,
	Own: map[fault.Fault]string{
		fault.Kill: "kills a PostgreSQL server's client sessions: it takes a PostgreSQL strategy",
	},
	Start:  startStress,
	Worker: stressWorker,
}

// stressRun is a stress run's side of a PostgreSQL server: with a
// partition or a failover among the faults, the loopback proxy the
// clients reach it through, which the partition cuts and the failover
// moves.
type stressRun struct {
	s     *pgproc.Server
	proxy *tcpproxy.Proxy

	// With failovers among the faults: primary is the server the clients
	// reach now (s until the first failover), standby the asynchronous
	// standby the next failover promotes (nil while none is ready), and
	// started the servers the run started, which Close closes.
	mu      sync.Mutex
	primary *pgproc.Server
	standby *pgproc.Server
	started []*pgproc.Server
}

// standbyStart bounds the start of a standby (pg_basebackup and its
// first replay).
const standbyStart = time.Minute

// startStress runs on the primary of n, a *Node. It puts a proxy in front
// of the server when a partition may cut the clients off from it, or a
// failover move the primary; for a failover it starts the first standby.
func startStress(_ context.Context, n stress.StoreServers, o stress.Options) (stress.StoreRun, error) {
	pn, ok := n.(*Node)
	if !ok {
		return nil, fmt.Errorf("stress on PostgreSQL: the servers are a %T, not a PostgreSQL Node", n)
	}
	srv := pn.Primary()
	p := &stressRun{s: srv, primary: srv}
	if slices.Contains(o.Faults, fault.Partition) || slices.Contains(o.Faults, fault.Failover) {
		var err error
		if p.proxy, err = tcpproxy.New(serverAddr(srv)); err != nil {
			return nil, err
		}
	}
	if slices.Contains(o.Faults, fault.Failover) {
		ctx, cancel := context.WithTimeout(context.Background(), standbyStart)
		defer cancel()
		sb, err := srv.StartStandby(ctx, pgproc.Options{})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("stress: starting the standby a failover promotes: %w", err)
		}
		p.standby, p.started = sb, append(p.started, sb)
	}
	return p, nil
}

// serverAddr is s's "host:port".
func serverAddr(s *pgproc.Server) string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Empty leaves the server as it is: it is the run's own, and its lock
// table is not emptied first.
func (p *stressRun) Empty(context.Context) error { return nil }

// failover kills the primary (SIGKILL), promotes the standby and sends
// the clients' new connections to it: the address moves with the
// primary, and every session ends. The rows the standby had not replayed
// are lost with the old primary.
func (p *stressRun) failover(ctx context.Context) error {
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
	p.proxy.Retarget(serverAddr(sb))
	p.primary, p.standby = sb, nil
	return nil
}

// replaceStandby starts a standby of the primary for the next failover.
func (p *stressRun) replaceStandby(ctx context.Context) error {
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
func (p *stressRun) current() *pgproc.Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primary
}

// WorkerArgs is the DSN a worker connects with: the server's, or the
// proxy's when there is one.
func (p *stressRun) WorkerArgs(int) []string {
	if p.proxy == nil {
		return []string{p.s.DSN()}
	}
	u, err := url.Parse(p.s.DSN())
	if err != nil {
		return []string{p.s.DSN()}
	}
	u.Host = p.proxy.Addr()
	return []string{u.String()}
}

// stressWorker gives a worker process's cfg a connection pool of its own
// on the DSN args[0]: its sessions end with the process.
func stressWorker(ctx context.Context, args []string, cfg *locklab.Config) (func(), error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("worker: PostgreSQL takes one --store-arg, the DSN; got %d", len(args))
	}
	pool, err := pgxpool.New(ctx, args[0])
	if err != nil {
		return nil, err
	}
	cfg.Store = pool
	return pool.Close, nil
}

// Close closes the proxy and the standbys the run started.
func (p *stressRun) Close() error {
	if p.proxy != nil {
		p.proxy.Close()
	}
	p.mu.Lock()
	started := p.started
	p.started = nil
	p.mu.Unlock()
	var errs []error
	for _, s := range started {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// Connect gives cfg a new connection pool on the server for one client
// incarnation, through the proxy if there is one, whose every statement
// may crash it (c): once it has crashed, it opens no connection and
// lends none it has.
func (p *stressRun) Connect(ctx context.Context, _ int, c stress.Crasher, cfg *locklab.Config) (func(), error) {
	pc, err := pgxpool.ParseConfig(p.s.DSN())
	if err != nil {
		return nil, err
	}
	// A holder of pg-for-update or pg-advisory keeps a connection for its
	// lease; a waiter needs another.
	pc.MaxConns = 4
	pc.ConnConfig.Tracer = crashTracer{c}
	dial := pc.ConnConfig.DialFunc
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if c.Crashed() {
			return nil, stress.ErrCrashed
		}
		if p.proxy != nil {
			addr = p.proxy.Addr()
		}
		return dial(ctx, network, addr)
	}
	pc.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		if c.Crashed() {
			return false, stress.ErrCrashed
		}
		return true, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	cfg.Store = pool
	return pool.Close, nil
}

// crashTracer is the crasher's hook on a pool's statements: after each
// one the client may crash.
type crashTracer struct{ c stress.Crasher }

func (t crashTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (t crashTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) { t.c.Roll() }

// Stuck says starvation: the run does not tell, on PostgreSQL, a lock
// that never frees (a session that lives on, holding it) from one taken
// again and again by the same few.
func (p *stressRun) Stuck(context.Context, string) (string, bool) { return stress.KindStarvation, true }

// Fault strikes the server the clients reach with s.Kind for s.For, then
// heals it: a pause is followed by SIGCONT, a kill by a start on the same
// data directory, a cut by healing it, a failover by a new standby. A
// fault in progress is always healed, even when ctx ends meanwhile.
func (p *stressRun) Fault(ctx context.Context, st *stress.Strike) error {
	bg := context.WithoutCancel(ctx)
	kind := st.Kind()
	s := p.current()
	name := "postgres " + serverAddr(s)
	var begin, end func() error
	var what string
	switch kind {
	case fault.Pause:
		begin, end = s.Stop, s.Cont
		what = fmt.Sprintf("paused (SIGSTOP to the postmaster and every backend) for %v", st.For())
	case fault.Partition:
		if pr := p.proxy; pr != nil {
			begin = func() error { pr.Cut(); return nil }
			end = func() error { pr.Heal(); return nil }
		}
		what = fmt.Sprintf("cut off from the clients for %v: the server ends their sessions, and they hear nothing until it heals", st.For())
	case fault.Failover:
		begin = func() error { return p.failover(bg) }
		end = func() error { return p.replaceStandby(bg) }
		what = "failed over: the primary killed (SIGKILL), its asynchronous standby promoted and the clients' new " +
			"connections sent to it; every session ends, and what the standby had not replayed is lost; a new " +
			"standby starts once the fault's time is up"
	case fault.Kill:
		begin = func() error { return terminateSessions(bg, s) }
		end = func() error { return nil }
		what = "had every client session killed (pg_terminate_backend): their locks end with them, the server runs on"
	case fault.RestartKeep:
		begin = func() error { s.KillPostmaster(); return nil }
		end = func() error { return s.Restart(bg) }
		what = fmt.Sprintf("killed (SIGKILL) for %v, then started again on its data directory: every session ends", st.For())
	}
	if begin == nil {
		begin = func() error { return fmt.Errorf("node fault %v on PostgreSQL: %w", kind, fault.ErrUnsupported) }
	}
	return st.Run(ctx, name, name, what, begin, end)
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
