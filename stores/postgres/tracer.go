// Each statement a step: the pgx tracer that submits a client's statements
// to the scheduler, and how a timeline names them.

package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/strategies/pglock"
)

// pgTracer makes each statement of one client a step: it waits for the
// scheduler's grant before pgx sends the statement and records the answer
// in the step's event. The tables' CREATE TABLE IF NOT EXISTS, which a
// strategy sends once before its first statement, runs outside the
// schedule: it is set-up, not part of any algorithm; so does
// pg-lock-table-sync's reading of its replication settings after it
// (pglock.SyncSettingsSQL).
type pgTracer struct {
	s *pgStore
	// c is the client the pool serves now (s.mu); nil between runs.
	c *harness.Client
	// sessions are what each connection's session holds in the run, for
	// the declarations of its statements (s.mu; touch.go).
	sessions map[*pgx.Conn]*pgSession
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

type pgStep struct {
	sent    *harness.Sent
	stmt    stmt
	session *pgSession
}

func (t *pgTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	sql := strings.Join(strings.Fields(data.SQL), " ")
	if strings.HasPrefix(sql, "CREATE TABLE IF NOT EXISTS") {
		t.s.created(sql)
		return ctx
	}
	if sql == pglock.SyncSettingsSQL {
		return ctx
	}
	c := t.binding(conn)
	if c == nil {
		return cancelled(ctx, harness.ErrStopped) // no run: the pool's client is gone
	}
	if sock, ok := conn.PgConn().Conn().(*pgSocket); ok {
		sock.value.last = ""
	}
	st := classify(data.SQL, data.Args)
	t.s.mu.Lock()
	st.nameKey(t.s.lockKey)
	args := pgArgs(data.Args, t.s.lockKey)
	h := t.sessions[conn]
	if h == nil {
		h = newSession()
		t.sessions[conn] = h
	}
	touch := h.declare(st, conn.PgConn().TxStatus() != 'I')
	t.s.mu.Unlock()
	sent, err := c.SendTouching(ctx, 1, sqlLabel(sql), args, touch)
	if err != nil {
		return cancelled(ctx, err)
	}
	if sock, ok := conn.PgConn().Conn().(*pgSocket); ok && sent.LoseReply() {
		sock.lose.Store(true)
	}
	return context.WithValue(ctx, pgStepKey{}, &pgStep{sent: sent, stmt: st, session: h})
}

func (t *pgTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	st, ok := ctx.Value(pgStepKey{}).(*pgStep)
	if !ok {
		return
	}
	var v any
	err := data.Err
	value := ""
	lost := ""
	if sock, ok := conn.PgConn().Conn().(*pgSocket); ok {
		value = sock.value.last
		lost, sock.lostTag = sock.lostTag, ""
	}
	if lost != "" {
		// The server's answer, which the client never read.
		err = nil
		data.CommandTag = pgconn.NewCommandTag(lost)
	}
	t.s.mu.Lock()
	st.session.answered(st.stmt, err, value)
	t.s.mu.Unlock()
	if err == nil {
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
