// Package redislock is a lock on a Redis key as a service writes it on
// go-redis, twice: GetThenDel releases with GET, compare, then DEL, as
// many services still do; CompareAndDelete is the same lock released by
// one script. Nothing here knows locklab: lock_test.go puts both through
// its race harness, as they are.
package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrTaken is TryLock's answer when another holds the key.
	ErrTaken = errors.New("redislock: taken")
	// ErrNotHeld is Unlock's answer when the key no longer holds the token.
	ErrNotHeld = errors.New("redislock: not held")
)

// GetThenDel takes the lock with SET NX PX; Unlock GETs the key, compares
// the token, then DELs it.
type GetThenDel struct {
	RDB *redis.Client
	// Rand is where tokens come from (nil: crypto/rand).
	Rand io.Reader
}

// TryLock takes key for ttl, or answers ErrTaken. It returns the token
// that unlocks it.
func (l GetThenDel) TryLock(ctx context.Context, key string, ttl time.Duration) (string, error) {
	b := make([]byte, 8)
	if _, err := io.ReadFull(cmpOr(l.Rand, rand.Reader), b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	ok, err := l.RDB.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return "", err
	}
	if !ok {
		return "", ErrTaken
	}
	return token, nil
}

// Unlock deletes key if it still holds token.
func (l GetThenDel) Unlock(ctx context.Context, key, token string) error {
	v, err := l.RDB.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) || (err == nil && v != token) {
		return ErrNotHeld
	}
	if err != nil {
		return err
	}
	return l.RDB.Del(ctx, key).Err() // the key may have expired, and be another's, since the GET
}

// CompareAndDelete is the same lock, released by one script that deletes
// the key only if it still holds the token.
type CompareAndDelete struct{ GetThenDel }

var unlock = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Unlock deletes key if it still holds token, in one step on the server.
func (l CompareAndDelete) Unlock(ctx context.Context, key, token string) error {
	n, err := unlock.Run(ctx, l.RDB, []string{key}, token).Int()
	if err == nil && n == 0 {
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
