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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores/postgres/pgproc"
)

// Name is the store of the strategies of family "postgres".
const Name = "postgres"

// Node is a PostgreSQL server that runs of the postgres family's
// strategies lock on. Kill and Restart strike its postmaster; a restart
// keeps the data directory either way (a database keeps its tables on
// disk: only its sessions, and the locks they held, are lost).
//
// Failover promotes an asynchronous streaming standby in the primary's
// place. Prepare, which a failover scenario's runs call, starts one (or
// connects the one there to the primary again); the store cuts it off once
// it has emptied the run's key and the standby has replayed that, so that
// it misses every write of the run, as Replicated's Redis replica does.
// Failover kills the primary (SIGKILL), closes it, and promotes the
// standby; from then on Primary is the promoted server, and clients that
// connect to the node reach it, as through an address that moves with the
// primary. The next Prepare starts a new standby of it.
type Node struct {
	NodeName string
	// Server is the server the node starts on: its primary until a
	// failover (Primary).
	Server *pgproc.Server

	mu sync.Mutex
	// promoted is the primary since the last failover (nil: Server);
	// standby the streaming standby (nil: none yet, or promoted).
	promoted, standby *pgproc.Server
	// lag: the run being prepared cuts the standby off once the store has
	// emptied its key (cutStandby); cut: the standby is cut off.
	lag, cut bool
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Primary is the server that clients of the node reach: Server, or the
// standby the last failover promoted.
func (n *Node) Primary() *pgproc.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.promoted != nil {
		return n.promoted
	}
	return n.Server
}

// Addr returns the primary's "host:port".
func (n *Node) Addr() string {
	return net.JoinHostPort(n.Primary().Host, strconv.Itoa(n.Primary().Port))
}

// Store returns Name.
func (n *Node) Store() string { return Name }

// Kill stops the primary's postmaster at once (SIGKILL); its backends end
// with it.
func (n *Node) Kill(context.Context) error {
	n.Primary().KillPostmaster()
	return nil
}

// Restart kills the primary if it runs and starts it again on the same
// data directory, whatever keepData says.
func (n *Node) Restart(ctx context.Context, _ bool) error { return n.Primary().Restart(ctx) }

// dial wraps a pgx dial function so that it connects to the node's
// primary of the moment, whatever address the connection was configured
// with: after a failover, new connections reach the promoted server.
func (n *Node) dial(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dial(ctx, network, n.Addr())
	}
}

// Prepare gets the node ready for a run that may fail over: a standby
// streams from the primary (a new one after a failover), and the store
// cuts it off once it has emptied the run's key.
func (n *Node) Prepare(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	primary := n.Server
	if n.promoted != nil {
		primary = n.promoted
	}
	switch {
	case n.standby == nil:
		sb, err := primary.StartStandby(ctx, pgproc.Options{})
		if err != nil {
			return fmt.Errorf("node %s: %w", n.NodeName, err)
		}
		n.standby = sb
	case n.cut:
		if err := n.standby.StartStreaming(ctx); err != nil {
			return fmt.Errorf("node %s: %w", n.NodeName, err)
		}
	}
	n.cut, n.lag = false, true
	return nil
}

// cutStandby cuts the standby off from the primary, once it has replayed
// everything the primary has written, when the run was prepared for a
// failover: the standby then misses every write of the run.
func (n *Node) cutStandby(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.lag || n.standby == nil {
		return nil
	}
	n.lag = false
	primary := n.Server
	if n.promoted != nil {
		primary = n.promoted
	}
	if err := n.standby.WaitReplayed(ctx, primary); err != nil {
		return fmt.Errorf("node %s: %w", n.NodeName, err)
	}
	if err := n.standby.StopStreaming(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.NodeName, err)
	}
	n.cut = true
	return nil
}

// Failover kills the primary, removes it, and promotes the standby, which
// lacks every write since the run began (Prepare): it has neither the
// primary's sessions (their advisory locks, their open transactions and
// the row locks these hold) nor the rows written since. Without a standby
// (no Prepare) it is an error.
func (n *Node) Failover(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.standby == nil {
		return fmt.Errorf("node %s has no standby to promote", n.NodeName)
	}
	old := n.Server
	if n.promoted != nil {
		old = n.promoted
	}
	old.KillPostmaster()
	if err := n.standby.Promote(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.NodeName, err)
	}
	n.promoted, n.standby, n.lag, n.cut = n.standby, nil, false, false
	old.Close()
	return nil
}

// DropStandby stops and removes the standby, if any: the cells that
// follow a failover cell run on a lone primary.
func (n *Node) DropStandby() error {
	n.mu.Lock()
	sb := n.standby
	n.standby, n.lag, n.cut = nil, false, false
	n.mu.Unlock()
	if sb == nil {
		return nil
	}
	return sb.Close()
}

// Close stops and removes the node's servers: the standby, the promoted
// primary, and Server (a failover has closed it already).
func (n *Node) Close() error {
	err := n.DropStandby()
	n.mu.Lock()
	p := n.promoted
	n.mu.Unlock()
	if p != nil {
		err = errors.Join(err, p.Close())
	}
	return errors.Join(err, n.Server.Close())
}

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

func newStore(n *Node) (*pgStore, error) {
	cfg, err := pgxpool.ParseConfig(n.Primary().DSN())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.DialFunc = n.dial(cfg.ConnConfig.DialFunc)
	admin, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return &pgStore{node: n, admin: admin, clients: map[*harness.Client]*pgClient{}, spare: map[int]*pgClient{},
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
		// pgxpool pings a connection idle for more than a second before
		// lending it, and quietly replaces one that died: whether a
		// client's statement after a fault fails on its dead session or
		// runs on a new one would depend on how long the steps between
		// took on the wall clock. Never pinging keeps a run's outcome the
		// schedule's: the first statement on a session the server ended
		// fails, as it does for a client that was not pinging either.
		pcfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
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
	// A run prepared for a failover: from here on, the standby misses
	// every write.
	return s.node.cutStandby(ctx)
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
	if restarted || pc.pool.Stat().AcquiredConns() > 0 {
		// Every session is gone with the server, or some connection is
		// still out of the pool: none is known clean.
		pc.pool.Close()
		clear(kept)
	} else {
		s.mu.Lock()
		pc.tracer.c = nil
		s.spare[c.ID()] = pc
		s.mu.Unlock()
	}
	var gone []uint32
	for _, pid := range s.live(pc) {
		if !kept[pid] {
			gone = append(gone, pid)
		}
	}
	return s.waitEnded(ctx, fmt.Sprintf("c%d", c.ID()), gone)
}

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
	return len(ended), s.waitEnded(ctx, "the isolated clients", gone)
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
	spare := s.spare
	s.spare = map[int]*pgClient{}
	s.mu.Unlock()
	for _, pc := range spare {
		pc.pool.Close()
	}
}

// Close empties the server and closes the store's pools.
func (s *pgStore) Close(ctx context.Context) error {
	err := s.Empty(ctx)
	s.mu.Lock()
	spare := s.spare
	s.spare = map[int]*pgClient{}
	s.mu.Unlock()
	for _, pc := range spare {
		pc.pool.Close()
	}
	s.admin.Close()
	return err
}

var _ harness.Store = (*pgStore)(nil)

// isPGCode reports a server error with SQLSTATE code.
func isPGCode(err error, code string) bool {
	var pe interface{ SQLState() string }
	return errors.As(err, &pe) && pe.SQLState() == code
}

// pgTracer makes each statement of one client a step: it waits for the
// scheduler's grant before pgx sends the statement and records the answer
// in the step's event. The tables' CREATE TABLE IF NOT EXISTS, which a
// strategy sends once before its first statement, runs outside the
// schedule: it is set-up, not part of any algorithm.
type pgTracer struct {
	s *pgStore
	// c is the client the pool serves now (s.mu); nil between runs.
	c *harness.Client
}

// binding returns the client the tracer's pool serves, and notes the
// backend a statement runs on.
func (t *pgTracer) binding(conn *pgx.Conn) *harness.Client {
	var server *pgproc.Server
	if sock, ok := conn.PgConn().Conn().(*pgSocket); ok {
		server = sock.server
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.c != nil {
		if pc := t.s.clients[t.c]; pc != nil {
			switch {
			case server == nil || server == pc.server:
				pc.backends[conn.PgConn().PID()] = true
			case server == t.s.node.Primary(): // the first statement since a failover
				pc.backends, pc.server = map[uint32]bool{conn.PgConn().PID(): true}, server
			}
			// Else a session of a server that failed over, dead with it.
		}
	}
	return t.c
}

type pgStepKey struct{}

type pgStep struct{ sent *harness.Sent }

func (t *pgTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	sql := strings.Join(strings.Fields(data.SQL), " ")
	if strings.HasPrefix(sql, "CREATE TABLE IF NOT EXISTS") {
		t.s.created(sql)
		return ctx
	}
	c := t.binding(conn)
	if c == nil {
		return cancelled(ctx, harness.ErrStopped) // no run: the pool's client is gone
	}
	if sock, ok := conn.PgConn().Conn().(*pgSocket); ok {
		sock.value.last = ""
	}
	t.s.mu.Lock()
	args := pgArgs(data.Args, t.s.lockKey)
	t.s.mu.Unlock()
	sent, err := c.Send(ctx, 1, sqlLabel(sql), args)
	if err != nil {
		return cancelled(ctx, err)
	}
	return context.WithValue(ctx, pgStepKey{}, &pgStep{sent: sent})
}

func (t *pgTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	st, ok := ctx.Value(pgStepKey{}).(*pgStep)
	if !ok {
		return
	}
	var v any
	err := data.Err
	if err == nil {
		value := ""
		if sock, ok := conn.PgConn().Conn().(*pgSocket); ok {
			value = sock.value.last
		}
		v = pgReply(data.CommandTag.String(), value)
	} else if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		// As a timeline shows a server's error: its code, named.
		err = pgError(pgErrorText(pe.Code, pe.Message))
	}
	st.sent.Done(v, err)
}

// cancelled is a context that ended with err: the statement pgx was about
// to send fails without reaching the server.
func cancelled(ctx context.Context, err error) context.Context {
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(err)
	return cctx
}

// sqlLabel is how a timeline names a statement: its verb and the table
// (without the locklab_ prefix) or the function it calls, and what sets it
// apart ("SELECT lock_rows FOR UPDATE NOWAIT", "pg_try_advisory_lock",
// "DELETE lock_table expired"); the statement's parameters follow it.
func sqlLabel(sql string) string {
	f := strings.Fields(sql)
	if len(f) == 0 {
		return sql
	}
	up := strings.ToUpper(sql)
	table := func(after string) string {
		for i, w := range f {
			if strings.EqualFold(w, after) && i+1 < len(f) {
				return strings.TrimPrefix(f[i+1], "locklab_")
			}
		}
		return ""
	}
	verb := strings.ToUpper(f[0])
	switch verb {
	case "SELECT":
		if len(f) > 1 && strings.HasPrefix(strings.ToLower(f[1]), "pg_") {
			name, _, _ := strings.Cut(f[1], "(")
			return name
		}
		out := "SELECT " + table("FROM")
		if strings.Contains(up, "FOR UPDATE") {
			out += " FOR UPDATE"
		}
		if strings.Contains(up, "NOWAIT") {
			out += " NOWAIT"
		}
		return out
	case "INSERT":
		out := "INSERT " + table("INTO")
		if strings.Contains(up, "ON CONFLICT DO NOTHING") {
			out += " or nothing"
		}
		return out
	case "DELETE":
		out := "DELETE " + table("FROM")
		if strings.Contains(up, "EXPIRES_AT <") {
			out += " expired"
		}
		return out
	case "UPDATE":
		return "UPDATE " + strings.TrimPrefix(f[min(1, len(f)-1)], "locklab_")
	}
	return verb
}

// ResourceTableName is the table of the versioned row the
// Scenario.Versioned scenarios protect: a version per key.
const ResourceTableName = "locklab_resource"

var _ harness.Versioned = (*pgStore)(nil)

// PrepareVersioned creates the versioned row of key at version 0 (and its
// table where it is missing), outside the schedule: empty has deleted the
// row an earlier run left.
func (s *pgStore) PrepareVersioned(ctx context.Context, key string) error {
	if _, err := s.admin.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+ResourceTableName+
		" (key text PRIMARY KEY, version bigint NOT NULL)"); err != nil {
		return fmt.Errorf("creating %s on %s: %w", ResourceTableName, s.node.Name(), err)
	}
	s.mu.Lock()
	if !slices.Contains(s.tables, ResourceTableName) {
		s.unlisted = true
	}
	s.mu.Unlock()
	if _, err := s.admin.Exec(ctx, "INSERT INTO "+ResourceTableName+" (key, version) VALUES ($1, 0) "+
		"ON CONFLICT (key) DO UPDATE SET version = 0", key); err != nil {
		return fmt.Errorf("creating the versioned row on %s: %w", s.node.Name(), err)
	}
	return nil
}

// pool returns client c's pool in the current run.
func (s *pgStore) pool(c *harness.Client) (*pgxpool.Pool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := s.clients[c]
	if pc == nil {
		return nil, harness.ErrStopped
	}
	return pc.pool, nil
}

// ReadVersion reads the versioned row's version through client c's pool:
// a step of c's.
func (s *pgStore) ReadVersion(ctx context.Context, c *harness.Client) (int64, error) {
	p, err := s.pool(c)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	key := s.lockKey
	s.mu.Unlock()
	var v int64
	err = p.QueryRow(ctx, "SELECT version FROM "+ResourceTableName+" WHERE key = $1", key).Scan(&v)
	return v, err
}

// WriteVersioned writes the versioned row through client c's pool, if its
// version is still v: a step of c's. It reports whether a row was updated.
func (s *pgStore) WriteVersioned(ctx context.Context, c *harness.Client, v int64) (bool, error) {
	p, err := s.pool(c)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	key := s.lockKey
	s.mu.Unlock()
	tag, err := p.Exec(ctx, "UPDATE "+ResourceTableName+" SET version = version + 1 WHERE key = $1 AND version = $2", key, v)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}
