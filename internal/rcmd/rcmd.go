// Package rcmd sends single Redis commands for the strategies: one call, one
// command, with the context honoured and failures wrapped in
// locklab.ErrUnavailable.
package rcmd

import (
	"context"
	"errors"
	"strings"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
)

// Do sends one command on c. A context that can be cancelled is passed to the
// connection (redigo closes the connection when it fires); a context that
// cannot be cancelled costs nothing. Errors wrap locklab.ErrUnavailable.
func Do(ctx context.Context, c redis.Conn, cmd string, args ...any) (any, error) {
	var (
		v   any
		err error
	)
	if ctx.Done() == nil {
		v, err = c.Do(cmd, args...)
	} else {
		if err = ctx.Err(); err != nil {
			return nil, locklab.Unavailable(err)
		}
		v, err = redis.DoContext(c, ctx, cmd, args...)
	}
	if err != nil {
		return nil, locklab.Unavailable(err)
	}
	return v, nil
}

// Script is a Lua script run with EVALSHA, falling back to EVAL the first time
// a server has not seen it.
type Script struct {
	s *redis.Script
}

// NewScript wraps src, a script that takes keyCount keys.
func NewScript(keyCount int, src string) Script {
	return Script{redis.NewScript(keyCount, src)}
}

// Hash is the script's SHA1.
func (s Script) Hash() string { return s.s.Hash() }

// Do runs the script on c: EVALSHA, then EVAL if the server answers NOSCRIPT.
func (s Script) Do(ctx context.Context, c redis.Conn, keysAndArgs ...any) (any, error) {
	var (
		v   any
		err error
	)
	if ctx.Done() == nil {
		v, err = s.s.Do(c, keysAndArgs...)
	} else {
		if err = ctx.Err(); err != nil {
			return nil, locklab.Unavailable(err)
		}
		v, err = s.s.DoContext(ctx, c, keysAndArgs...)
	}
	if err != nil {
		return nil, locklab.Unavailable(err)
	}
	return v, nil
}

// Conn takes a connection from src for one operation. The caller closes it.
func Conn(ctx context.Context, src locklab.ConnSource) (redis.Conn, error) {
	c, err := src.GetContext(ctx)
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, locklab.Unavailable(err)
	}
	return c, nil
}

// IsNoScript reports whether err is Redis's NOSCRIPT answer.
func IsNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(string(re), "NOSCRIPT")
}
