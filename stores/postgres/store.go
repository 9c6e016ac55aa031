// The PostgreSQL store: the locks of the postgres family (strategies/pglock)
// on a real PostgreSQL server. Each client gets a pgx pool of its own whose
// every statement is a step (a pgx tracer submits it to the scheduler); a
// crashed client's connections close, as a dead process's do; and when time
// passes, the server ends the sessions of the clients it can no longer
// reach, as its TCP keepalives would.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores/postgres/pgproc"
)

// pgStore is one PostgreSQL server.
//
// A client's pool outlives its run: the next run's client of the same
// number takes it over, with the sessions its earlier runs left idle and
// clean, so that a schedule costs no new connection (a backend forked,
// authenticated, its statements prepared again) for each client. What a
// run's sessions hold ends with the run: the strategy closes the sessions
// it holds (io.Closer), a session left inside a transaction or one the
// server ended is closed, and a crashed client's pool is closed whole, as
// its process's sockets would be.
type pgStore struct {
	node  *Node
	admin *pgxpool.Pool
	// sync: the slot's strategy is a column on a synchronous standby
	// (syncColumns): the node keeps one streaming (Node.Synchronous), and
	// the clients' sessions commit with synchronous_commit on.
	sync bool

	mu sync.Mutex
	// clients are the current run's clients' pools and backends.
	clients map[*harness.Client]*pgClient
	// spare are the pools of the earlier runs' clients, by client number.
	spare map[int]*pgClient
	// ended are the backends the store ended (advance); restarted: the
	// server restarted, every session is gone.
	ended     map[uint32]bool
	restarted bool
	// gone are the backends whose end a client's socket saw (pgSocket):
	// waitEnded need not ask the server about them. A new session on a
	// process id again takes it out.
	gone map[uint32]bool
	// lockKey is the key the runs lock (key).
	lockKey string
	// tables are the locklab_ tables empty deletes the key's rows from,
	// as the server last listed them; unlisted: they are to be listed
	// again, for a client has created a table not among them (a strategy
	// creates its tables, through its client, before it writes to them),
	// or the server restarted or failed over.
	tables   []string
	unlisted bool
}

// pgClient is what the store keeps of a client: its pool, the run and
// client its statements are steps of (the tracer reads them), and the
// backends (server process ids) its statements ran on in the run, on
// server. A failover moves the client to another server, where these ids
// name nothing of its (or, where process ids are not unique across
// servers, as in containers, other sessions): the backends start over.
type pgClient struct {
	pool     *pgxpool.Pool
	tracer   *pgTracer
	backends map[uint32]bool
	server   *pgproc.Server
}

// live returns the backends of pc that are on the node's primary: none
// once the server they ran on has failed over (they died with it).
func (s *pgStore) live(pc *pgClient) []uint32 {
	if pc.server != s.node.Primary() {
		return nil
	}
	return slices.Collect(maps.Keys(pc.backends))
}

func newStore(n *Node, sync bool) (*pgStore, error) {
	cfg, err := pgxpool.ParseConfig(n.Primary().DSN())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.RuntimeParams["application_name"] = pgproc.ClientName
	cfg.ConnConfig.DialFunc = n.dial(cfg.ConnConfig.DialFunc)
	admin, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	if sync {
		n.useSync()
	}
	return &pgStore{node: n, admin: admin, sync: sync, clients: map[*harness.Client]*pgClient{}, spare: map[int]*pgClient{},
		ended: map[uint32]bool{}, gone: map[uint32]bool{}, unlisted: true}, nil
}

// Connect gives client c a pool of its own on the server, whose statements
// are its steps: the pool an earlier run's client of the same number
// left, or a new one.
func (s *pgStore) Connect(c *harness.Client, cfg *locklab.Config) error {
	s.mu.Lock()
	pc := s.spare[c.ID()]
	delete(s.spare, c.ID())
	s.mu.Unlock()
	if pc == nil {
		pcfg, err := pgxpool.ParseConfig(s.node.Primary().DSN())
		if err != nil {
			return err
		}
		pcfg.MaxConns = 4
		// Named, so that the servers' audit knows the client's backends
		// (audit.go); set here, not in the DSN, so that a pool a lock
		// makes of pcfg's connection string is not.
		pcfg.ConnConfig.RuntimeParams["application_name"] = pgproc.ClientName
		// pgxpool pings a connection idle for more than a second before
		// lending it, and quietly replaces one that died: whether a
		// client's statement after a fault fails on its dead session or
		// runs on a new one would depend on how long the steps between
		// took on the wall clock. Never pinging keeps a run's outcome the
		// schedule's: the first statement on a session the server ended
		// fails, as it does for a client that was not pinging either.
		pcfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		if s.sync {
			// In the session's startup message: no statement of its own.
			pcfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
		}
		pc = &pgClient{tracer: &pgTracer{s: s}}
		pcfg.ConnConfig.Tracer = pc.tracer
		dial := s.node.dial(pcfg.ConnConfig.DialFunc)
		pcfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			server := s.node.Primary()
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &pgSocket{Conn: c, s: s, server: server}, nil
		}
		pcfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
			if sock, ok := c.PgConn().Conn().(*pgSocket); ok {
				sock.pid.Store(c.PgConn().PID())
				s.mu.Lock()
				delete(s.gone, c.PgConn().PID())
				s.mu.Unlock()
				recordBools(c.TypeMap(), &sock.value)
			}
			return nil
		}
		if pc.pool, err = pgxpool.NewWithConfig(context.Background(), pcfg); err != nil {
			return err
		}
	}
	pc.backends, pc.server = map[uint32]bool{}, s.node.Primary()
	s.mu.Lock()
	pc.tracer.c = c
	pc.tracer.sessions = map[*pgx.Conn]*pgSession{}
	s.clients[c] = pc
	s.mu.Unlock()
	cfg.Store = pc.pool
	return nil
}

// Key notes the key the runs lock: what empty deletes, so that cells
// locking other keys can run beside the store's.
func (s *pgStore) Key(key string) string {
	s.mu.Lock()
	s.lockKey = key
	s.mu.Unlock()
	return key
}

// Empty ends the earlier run's sessions that hold anything (their locks
// end with them), keeps its clients' idle clean sessions for the next run,
// and deletes the rows of the runs' key from every table the strategies
// made.
func (s *pgStore) Empty(ctx context.Context) error {
	if err := s.empty(ctx); err != nil {
		return err
	}
	if s.sync {
		// A synchronous standby: it misses no committed write.
		return s.node.Synchronous(ctx)
	}
	// A run prepared for a failover: from here on, the standby misses
	// every write.
	return s.node.cutStandby(ctx)
}

// empty is Empty but for the standby: the sessions ended and the key's
// rows deleted.
func (s *pgStore) empty(ctx context.Context) error {
	s.mu.Lock()
	clients := slices.Collect(maps.Keys(s.clients))
	restarted := s.restarted
	s.restarted = false
	s.mu.Unlock()
	for _, c := range clients {
		if err := s.retire(ctx, c, restarted); err != nil {
			return err
		}
	}
	s.mu.Lock()
	clear(s.ended)
	clear(s.gone)
	s.mu.Unlock()
	s.mu.Lock()
	key := s.lockKey
	s.mu.Unlock()
	if err := s.deleteKey(ctx, key); err != nil {
		return fmt.Errorf("emptying the locklab_ tables on %s: %w", s.node.Name(), err)
	}
	return nil
}

// deleteKey deletes the rows of key from every locklab_ table, in one
// statement: the tables are listed only when a client may have created
// one since the last listing, or when the statement finds one gone.
func (s *pgStore) deleteKey(ctx context.Context, key string) error {
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		tables, unlisted := s.tables, s.unlisted
		s.mu.Unlock()
		if unlisted {
			rows, err := s.admin.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'locklab\_%' ORDER BY tablename`)
			if err != nil {
				return err
			}
			if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			s.mu.Lock()
			s.tables, s.unlisted = tables, false
			s.mu.Unlock()
		}
		if len(tables) == 0 {
			return nil
		}
		_, err := s.admin.Exec(ctx, deleteKeySQL(tables), key)
		if err == nil || attempt > 0 || !isPGCode(err, "42P01") {
			return err
		}
		// A table listed is gone (a failover promoted a standby that
		// never had it): list them again.
		s.mu.Lock()
		s.unlisted = true
		s.mu.Unlock()
	}
}

// deleteKeySQL is one statement that deletes the rows of the key $1 from
// every table of tables.
func deleteKeySQL(tables []string) string {
	var b strings.Builder
	for i, t := range tables {
		if i == 0 {
			b.WriteString("WITH ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "d%d AS (DELETE FROM %s WHERE key = $1)", i, pgx.Identifier{t}.Sanitize())
	}
	b.WriteString(" SELECT 1")
	return b.String()
}

// created notes the CREATE TABLE IF NOT EXISTS statement sql a client
// sends: a table the store has not listed makes it list them again.
func (s *pgStore) created(sql string) {
	f := strings.Fields(sql)
	if len(f) < 6 {
		return
	}
	name := strings.Trim(strings.ToLower(f[5]), `"`)
	if i := strings.IndexByte(name, '('); i >= 0 {
		name = name[:i]
	}
	s.mu.Lock()
	if !slices.Contains(s.tables, name) {
		s.unlisted = true
	}
	s.mu.Unlock()
}

// retire ends client c's part in its run: the sessions its strategy holds
// are closed (io.Closer), and so is every idle one that is not clean (in
// a transaction, ended by the server, or every one after a restart);
// the pool, with the clean ones, waits for the next run's client of c's
// number. It returns once the server has ended every closed session.
func (s *pgStore) retire(ctx context.Context, c *harness.Client, restarted bool) error {
	s.mu.Lock()
	pc := s.clients[c]
	delete(s.clients, c)
	ended := maps.Clone(s.ended)
	s.mu.Unlock()
	if pc == nil {
		return nil
	}
	if cl, ok := c.Locker().(io.Closer); ok {
		cl.Close()
	}
	kept := map[uint32]bool{}
	if !restarted {
		for _, conn := range pc.pool.AcquireAllIdle(ctx) {
			pg := conn.Conn().PgConn()
			if pg.IsClosed() || pg.TxStatus() != 'I' || ended[pg.PID()] {
				discardConn(conn)
				continue
			}
			kept[pg.PID()] = true
			conn.Release()
		}
	}
	held := !restarted && pc.pool.Stat().AcquiredConns() > 0
	switch {
	case restarted:
		// Every session is gone with the server.
		pc.pool.Close()
		clear(kept)
	case held:
		// Some connection is still out of the pool: none is known clean,
		// and the lock may never give it back (a release of one's own
		// that failed before it did). The pool closes once it does; the
		// server ends the sessions now (below).
		go pc.pool.Close()
		clear(kept)
	default:
		s.mu.Lock()
		pc.tracer.c = nil
		s.spare[c.ID()] = pc
		s.mu.Unlock()
	}
	var gone []uint32
	var end []int32
	for _, pid := range s.live(pc) {
		if !kept[pid] {
			gone = append(gone, pid)
			end = append(end, int32(pid))
		}
	}
	who := fmt.Sprintf("c%d", c.ID())
	if held {
		_, err := s.terminate(ctx, who, end)
		return err
	}
	return s.waitEnded(ctx, who, gone)
}

// Advance: the server keeps no time of its own for locks (the lock table's
// expiry is the clients' clocks'). But time passing is what lets it notice
// the clients it cannot reach: a time step ends the sessions of the
// isolated clients, as unanswered TCP keepalives would (pgproc's settings
// make that take seconds; a step of time is the TTL, 30s). It returns how
// many sessions it ended.
func (s *pgStore) Advance(ctx context.Context, _ int, d time.Duration) (int, error) {
	if d < time.Second {
		return 0, nil
	}
	clients := s.snapshot()
	var pids []int32
	for c, backends := range clients {
		if c.Isolated() && !c.Crashed() {
			for _, pid := range backends {
				pids = append(pids, int32(pid))
			}
		}
	}
	return s.terminate(ctx, "the isolated clients", pids)
}

// Terminate ends client c's sessions from the server's side, as an
// administrator's pg_terminate_backend or an idle_session_timeout would
// (terminate(cN)): their advisory locks and open transactions end with
// them, and c's next statement on each fails.
func (s *pgStore) Terminate(ctx context.Context, c *harness.Client) (int, error) {
	var pids []int32
	for _, pid := range s.snapshot()[c] {
		pids = append(pids, int32(pid))
	}
	return s.terminate(ctx, fmt.Sprintf("c%d", c.ID()), pids)
}

// terminate ends the backends pids of who and waits until they have
// ended. It returns how many it ended.
func (s *pgStore) terminate(ctx context.Context, who string, pids []int32) (int, error) {
	if len(pids) == 0 {
		return 0, nil
	}
	// One statement signals them all; pg_terminate_backend's own wait
	// polls every 10ms, so the store polls for their end itself.
	rows, err := s.admin.Query(ctx, "SELECT pid FROM unnest($1::int4[]) AS pid WHERE pg_terminate_backend(pid)", pids)
	if err != nil {
		return 0, fmt.Errorf("ending backends %v on %s: %w", pids, s.node.Name(), err)
	}
	ended, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, fmt.Errorf("ending backends %v on %s: %w", pids, s.node.Name(), err)
	}
	gone := make([]uint32, len(ended))
	s.mu.Lock()
	for i, pid := range ended {
		gone[i] = uint32(pid)
		s.ended[uint32(pid)] = true
	}
	s.mu.Unlock()
	return len(ended), s.waitEnded(ctx, who, gone)
}

// Crashed closes c's connections: a process that dies closes its sockets,
// and the server ends its sessions at once.
func (s *pgStore) Crashed(c *harness.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.disconnect(ctx, c); err != nil {
		c.Fail(err)
	}
}

// Probe reads who holds key: the token of the lock table's row, or the
// token of the client whose session holds an advisory lock or an open
// transaction (a FOR UPDATE lock); nil when nobody does.
func (s *pgStore) Probe(ctx context.Context, _ int, key string) (any, error) {
	var token string
	err := s.admin.QueryRow(ctx, "SELECT token FROM locklab_lock_table WHERE key = $1", key).Scan(&token)
	switch {
	case err == nil:
		return token, nil
	case errors.Is(err, pgx.ErrNoRows):
	case isPGCode(err, "42P01"): // no lock table yet
	default:
		return nil, err
	}
	// The sessions of the run's clients only: other cells' runs may lock
	// other keys on the server meanwhile.
	clients := s.snapshot()
	var mine []int32
	for _, backends := range clients {
		for _, pid := range backends {
			mine = append(mine, int32(pid))
		}
	}
	rows, err := s.admin.Query(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = ANY($1)
UNION SELECT pid FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND pid = ANY($1)`, mine)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, nil
	}
	var held []string
	for _, pid := range pids {
		// Process ids differ from one run to the next: a session is named
		// by its client's token when the client holds the lock, else by
		// the client.
		name := "another session"
		for c, backends := range clients {
			if slices.Contains(backends, uint32(pid)) {
				name = fmt.Sprintf("c%d's session", c.ID())
				if lease, holding := c.Holding(); holding {
					name = lease.Token
				}
			}
		}
		held = append(held, name)
	}
	slices.Sort(held)
	return strings.Join(held, ","), nil
}

// snapshot returns the current run's clients' backends. The store's lock
// is never held while a client's state is read.
func (s *pgStore) snapshot() map[*harness.Client][]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[*harness.Client][]uint32, len(s.clients))
	for c, pc := range s.clients {
		out[c] = s.live(pc)
	}
	return out
}

// Reconnect drops the store's own idle connections after the server was
// killed or restarted; the clients' pools find theirs broken, as a real
// client does.
func (s *pgStore) Reconnect(int) {
	s.admin.Reset()
	s.mu.Lock()
	s.restarted = true
	s.unlisted = true
	s.mu.Unlock()
	s.closeSpare()
}

// closeSpare closes the clients the earlier runs left for the next.
func (s *pgStore) closeSpare() {
	s.mu.Lock()
	spare := s.spare
	s.spare = map[int]*pgClient{}
	s.mu.Unlock()
	for _, pc := range spare {
		pc.pool.Close()
	}
}

// Close empties the server and closes the store's pools. The standby is
// left as it is, for the node's next slot, but for the synchronous one of
// a synchronous column, which the last such store to close drops
// (Node.leaveSync).
func (s *pgStore) Close(ctx context.Context) error {
	err := s.empty(ctx)
	s.closeSpare()
	s.admin.Close()
	if s.sync {
		err = errors.Join(err, s.node.leaveSync(ctx))
	}
	return err
}

var (
	_ harness.Store      = (*pgStore)(nil)
	_ harness.Terminator = (*pgStore)(nil)
)

// isPGCode reports a server error with SQLSTATE code.
func isPGCode(err error, code string) bool {
	var pe interface{ SQLState() string }
	return errors.As(err, &pe) && pe.SQLState() == code
}
