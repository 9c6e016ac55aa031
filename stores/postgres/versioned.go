// The versioned row of the Scenario.Versioned scenarios, on the lock's own
// server.

package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locklab/locklab/harness"
)

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
