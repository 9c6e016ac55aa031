// The servers' audit: the client backends pg_stat_activity shows that the
// harness did not open.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/audit"
	"github.com/locklab/locklab/stores/postgres/pgproc"
)

// startAudit is the store's Driver.Audit. Every connection the harness
// opens to a server is named pgproc.ClientName (application_name); once
// the runs are over and their pools closed, a client backend still on the
// primary under another name, or none, is a client of the lock's own
// beside the pool it was given (a second pool, a connection kept for its
// advisory locks), whose statements no run scheduled. Only the backends
// still open are seen: pg_stat_activity keeps no record of the ones that
// ended.
func startAudit(_ context.Context, nodes []harness.Node) (func(context.Context) error, error) {
	var ns []*Node
	for _, n := range nodes {
		if pn, ok := n.(*Node); ok {
			ns = append(ns, pn)
		}
	}
	return func(ctx context.Context) error {
		var errs []error
		for _, n := range ns {
			s := audit.Server{Name: n.Name(), Addr: n.Addr()}
			found, err := strangers(ctx, n.Primary())
			switch {
			case err != nil:
				errs = append(errs, s.Unread("", err))
			case len(found) > 0:
				errs = append(errs, s.Found(audit.NotOpened("has", len(found), "client backend", found)))
			}
		}
		return errors.Join(errs...)
	}, nil
}

// auditWait bounds the audit's reading of one server, which a run may
// have left paused: pgx waits on its context alone. (Redis's and
// ZooKeeper's reads have their own timeouts.)
const auditWait = 5 * time.Second

// strangers returns the client backends of server s other than the
// harness's, each as its pid, application_name, state and last statement.
func strangers(ctx context.Context, s *pgproc.Server) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, auditWait)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN()+"&application_name="+pgproc.ClientName)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, `SELECT pid, application_name, coalesce(state, ''), left(query, 60)
		FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND application_name <> $1
		ORDER BY pid`, pgproc.ClientName)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		var pid int32
		var app, state, query string
		if err := rows.Scan(&pid, &app, &state, &query); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("pid %d application_name=%q %s: %s", pid, app, state, query))
	}
	return out, rows.Err()
}
