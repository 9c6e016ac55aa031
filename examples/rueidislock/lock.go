// Package rueidislock is a lock on a Redis key as a service writes it on
// rueidis, twice: GetThenDel releases with GET, compare, then DEL, as
// many services still do; CompareAndDelete is the same lock released by
// one script. Nothing here knows locklab: lock_test.go puts both through
// its race harness, as they are.
package rueidislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"time"

	"github.com/redis/rueidis"
)

var (
	// ErrTaken is TryLock's answer when another holds the key.
	ErrTaken = errors.New("rueidislock: taken")
	// ErrNotHeld is Unlock's answer when the key no longer holds the token.
	ErrNotHeld = errors.New("rueidislock: not held")
)

// GetThenDel takes the lock with SET NX PX; Unlock GETs the key, compares
// the token, then DELs it.
type GetThenDel struct {
	Client rueidis.Client
	// Rand is where tokens come from (nil: crypto/rand).
	Rand io.Reader
}

// TryLock takes key for ttl, or answers ErrTaken. It returns the token
// that unlocks it.
func (l GetThenDel) TryLock(ctx context.Context, key string, ttl time.Duration) (string, error) {
	b := make([]byte, 8)
	r := l.Rand
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	c := l.Client
	err := c.Do(ctx, c.B().Set().Key(key).Value(token).Nx().Px(ttl).Build()).Error()
	if rueidis.IsRedisNil(err) {
		return "", ErrTaken
	}
	if err != nil {
		return "", err
	}
	return token, nil
}

// Unlock deletes key if it still holds token.
func (l GetThenDel) Unlock(ctx context.Context, key, token string) error {
	c := l.Client
	v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) || (err == nil && v != token) {
		return ErrNotHeld
	}
	if err != nil {
		return err
	}
	return c.Do(ctx, c.B().Del().Key(key).Build()).Error() // the key may have expired, and be another's, since the GET
}

// CompareAndDelete is the same lock, released by one script that deletes
// the key only if it still holds the token.
type CompareAndDelete struct{ GetThenDel }

var unlock = rueidis.NewLuaScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Unlock deletes key if it still holds token, in one step on the server.
func (l CompareAndDelete) Unlock(ctx context.Context, key, token string) error {
	n, err := unlock.Exec(ctx, l.Client, []string{key}, []string{token}).AsInt64()
	if err == nil && n == 0 {
		return ErrNotHeld
	}
	return err
}
