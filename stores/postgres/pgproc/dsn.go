// How clients reach a server (its DSNs), and the one-off statements this
// package runs on it over a fresh connection.

package pgproc

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClientName is the application_name of every connection the harness
// opens to a server (pg_stat_activity shows it): a client backend named
// otherwise, or not at all, is someone else's.
const ClientName = "locklab"

// query runs sql on a fresh connection, scanning its one row into dest.
func (s *Server) query(ctx context.Context, sql string, dest ...any) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(cctx, s.DSN()+"&connect_timeout=2&application_name="+ClientName)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.QueryRow(cctx, sql).Scan(dest...)
}

// DSN is the URL a client connects with: the superuser, over TCP on
// loopback, without TLS. Add pgx pool options such as pool_max_conns as
// query parameters.
func (s *Server) DSN() string {
	u := url.URL{Scheme: "postgres", User: url.User(SuperUser),
		Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), Path: "/" + Database,
		RawQuery: "sslmode=disable"}
	return u.String()
}

// ConnString is DSN as libpq keywords ("host=... port=..."), for tools
// that take that form.
func (s *Server) ConnString() string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", s.Host, s.Port, SuperUser, Database)
}

// SocketDSN is the URL of a connection through the unix socket in Dir.
func (s *Server) SocketDSN() string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", SuperUser, Database, url.QueryEscape(s.Dir), s.Port)
}

// quote is v as an SQL string literal.
func quote(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// exec runs each of sqls in turn on one fresh connection.
func (s *Server) exec(ctx context.Context, sqls ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(cctx, s.DSN()+"&connect_timeout=2&application_name="+ClientName)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for _, sql := range sqls {
		if _, err := c.Exec(cctx, sql); err != nil {
			return fmt.Errorf("%s %s: %w", sql, s.where(), err)
		}
	}
	return nil
}
