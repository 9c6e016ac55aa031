// The guarded write of the Scenario.Guarded scenarios on PostgreSQL: a row
// with a version column on the lock's own server, whose version the
// holder reads once it has the lock and whose UPDATE ... WHERE version = $2
// updates nothing once another client has written since.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
)

// ResourceTableName is the table of the versioned row the
// Scenario.Guarded scenarios protect: a version per key.
const ResourceTableName = "locklab_resource"

// guardWhat is what every PostgreSQL lock hands its user that the
// guarded write checks (harness.Driver.Guards): nothing of the lock's;
// the row's version, read once the lock is taken.
const guardWhat = "nothing of the lock's: the holder reads the row's version once it has the lock, " +
	"and its UPDATE ... WHERE key = $1 AND version = $2 updates no row once another client wrote"

var _ harness.Guarded = (*pgStore)(nil)

// PrepareGuarded creates the versioned row of key at version 0 (and its
// table where it is missing), outside the schedule: empty has deleted the
// row an earlier run left.
func (s *pgStore) PrepareGuarded(ctx context.Context, key string) error {
	create := "CREATE TABLE IF NOT EXISTS " + ResourceTableName + " (key text PRIMARY KEY, version bigint NOT NULL)"
	_, err := s.admin.Exec(ctx, create)
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "23505" {
		// Two sessions that create the table at once: the one that lost
		// the race on the catalog's unique index finds it there now.
		_, err = s.admin.Exec(ctx, create)
	}
	if err != nil {
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

// ReadGuard reads the versioned row's version through client c's pool: a
// step of c's. The lease has no part in it.
func (s *pgStore) ReadGuard(ctx context.Context, c *harness.Client, _ locklab.Lease) (harness.Guard, error) {
	p, err := s.pool(c)
	if err != nil {
		return harness.Guard{}, err
	}
	s.mu.Lock()
	key := s.lockKey
	s.mu.Unlock()
	var v int64
	if err := p.QueryRow(ctx, "SELECT version FROM "+ResourceTableName+" WHERE key = $1", key).Scan(&v); err != nil {
		return harness.Guard{}, err
	}
	return versionGuard(key, v), nil
}

// versionGuard is the guard of a write of key's row at version v.
func versionGuard(key string, v int64) harness.Guard {
	return harness.Guard{Key: key, Version: v, Show: "version " + strconv.FormatInt(v, 10)}
}

// WriteGuarded writes the versioned row through client c's pool, if its
// version is still g's: a step of c's. It reports whether a row was
// updated; the next write's guard is the version it wrote.
func (s *pgStore) WriteGuarded(ctx context.Context, c *harness.Client, g harness.Guard) (harness.Guard, bool, error) {
	p, err := s.pool(c)
	if err != nil {
		return g, false, err
	}
	tag, err := p.Exec(ctx, "UPDATE "+ResourceTableName+" SET version = version + 1 WHERE key = $1 AND version = $2", g.Key, g.Version)
	if err != nil {
		return g, false, err
	}
	return versionGuard(g.Key, g.Version+1), tag.RowsAffected() == 1, nil
}
