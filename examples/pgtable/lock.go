// Package pgtable is a lock as a service writes it on pgx: a row per key
// in a lock table, with the holder's token and an expiry. GetThenDel
// releases by reading the row's token, comparing it, then deleting the
// key's row; TokenDelete is the same lock released by one DELETE that
// names the token. Nothing here knows locklab: lock_test.go puts both
// through its race harness, as they are.
package pgtable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	// ErrTaken is TryLock's answer when another holds the key.
	ErrTaken = errors.New("pgtable: taken")
	// ErrNotHeld is Unlock's answer when the row no longer holds the token.
	ErrNotHeld = errors.New("pgtable: not held")
)

// GetThenDel takes the lock with one upsert that replaces only an expired
// row; Unlock reads the row's token, compares it, then deletes the row.
type GetThenDel struct {
	Pool *pgxpool.Pool
	// Table is the lock table, one row per key held (created at the first
	// TryLock if missing; "" names it "locks").
	Table string
	// Now is the clock expiry is written and judged on (nil: time.Now).
	Now func() time.Time
	// Rand is where tokens come from (nil: crypto/rand).
	Rand io.Reader

	mu      sync.Mutex
	created bool
}

// TryLock takes key for ttl, or answers ErrTaken. It returns the token
// that unlocks it.
func (l *GetThenDel) TryLock(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := l.create(ctx); err != nil {
		return "", err
	}
	b := make([]byte, 8)
	if _, err := io.ReadFull(cmpOr(l.Rand, rand.Reader), b); err != nil {
		return "", err
	}
	token, now := hex.EncodeToString(b), l.now()
	tag, err := l.Pool.Exec(ctx, `INSERT INTO `+l.table()+` (key, token, expires_at) VALUES ($1, $2, $3)
ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token, expires_at = EXCLUDED.expires_at
WHERE `+l.table()+`.expires_at < $4`, key, token, now.Add(ttl), now)
	if err != nil {
		return "", err
	}
	if tag.RowsAffected() == 0 {
		return "", ErrTaken
	}
	return token, nil
}

// Unlock deletes key's row if it still holds token.
func (l *GetThenDel) Unlock(ctx context.Context, key, token string) error {
	var held string
	err := l.Pool.QueryRow(ctx, `SELECT token FROM `+l.table()+` WHERE key = $1`, key).Scan(&held)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && held != token) {
		return ErrNotHeld
	}
	if err != nil {
		return err
	}
	// The row may have expired, and be another's, since the SELECT.
	_, err = l.Pool.Exec(ctx, `DELETE FROM `+l.table()+` WHERE key = $1`, key)
	return err
}

// create creates the table, at the first TryLock that succeeds in it.
func (l *GetThenDel) create(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.created {
		return nil
	}
	_, err := l.Pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+l.table()+
		` (key text PRIMARY KEY, token text NOT NULL, expires_at timestamptz NOT NULL)`)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07") {
		err = nil // another session created it at the same moment
	}
	l.created = err == nil
	return err
}

func (l *GetThenDel) table() string {
	if l.Table == "" {
		return "locks"
	}
	return l.Table
}

func (l *GetThenDel) now() time.Time {
	if l.Now == nil {
		return time.Now()
	}
	return l.Now()
}

// TokenDelete is the same lock, released by one DELETE that deletes the
// row only if it still holds the token.
type TokenDelete struct{ *GetThenDel }

// Unlock deletes key's row if it still holds token, in one statement.
func (l TokenDelete) Unlock(ctx context.Context, key, token string) error {
	tag, err := l.Pool.Exec(ctx, `DELETE FROM `+l.table()+` WHERE key = $1 AND token = $2`, key, token)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrNotHeld
	}
	return err
}

func cmpOr(r, def io.Reader) io.Reader {
	if r == nil {
		return def
	}
	return r
}
