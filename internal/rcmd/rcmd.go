// Package rcmd sends single Redis commands for the strategies: one call, one
// command, with the context honoured and failures wrapped in
// locklab.ErrUnavailable.
package rcmd

import (
	"context"
	"errors"
	"reflect"
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
// a server has not seen it. Its constant arguments are boxed once, so that a
// run allocates only for the caller's keys and arguments.
type Script struct {
	hash, src, keyCount any
	sha                 string
}

// NewScript wraps src, a script that takes keyCount keys.
func NewScript(keyCount int, src string) Script {
	sha := redis.NewScript(keyCount, src).Hash()
	return Script{hash: sha, src: src, keyCount: keyCount, sha: sha}
}

// Hash is the script's SHA1.
func (s Script) Hash() string { return s.sha }

// Do runs the script on c: EVALSHA, then EVAL if the server answers NOSCRIPT.
func (s Script) Do(ctx context.Context, c redis.Conn, keysAndArgs ...any) (any, error) {
	args := make([]any, 2+len(keysAndArgs))
	args[0], args[1] = s.hash, s.keyCount
	copy(args[2:], keysAndArgs)
	v, err := Do(ctx, c, "EVALSHA", args...)
	if IsNoScript(err) {
		args[0] = s.src
		v, err = Do(ctx, c, "EVAL", args...)
	}
	return v, err
}

// IsNil reports whether src is nil or an interface holding a nil pointer
// (a typed nil such as (*redis.Pool)(nil)), which would panic at first use.
func IsNil(src locklab.ConnSource) bool {
	if src == nil {
		return true
	}
	v := reflect.ValueOf(src)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
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
	if err == nil {
		return false
	}
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(string(re), "NOSCRIPT")
}
