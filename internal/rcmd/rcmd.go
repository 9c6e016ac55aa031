// Package rcmd sends single Redis commands for the strategies: one call, one
// command, with the context honoured and failures wrapped in
// locklab.ErrUnavailable.
package rcmd

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/lockkit"
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
			return nil, lockkit.Unavailable(err)
		}
		v, err = redis.DoContext(c, ctx, cmd, args...)
	}
	if err != nil {
		return nil, lockkit.Unavailable(err)
	}
	return v, nil
}

// Script is a Lua script run with EVALSHA, falling back to EVAL the first time
// a server has not seen it. Its constant arguments are boxed once, so that a
// run allocates only for the caller's keys and arguments.
type Script struct {
	hash, src, keyCount any
	sha, name           string
}

// NewScript wraps src, a script that takes keyCount keys, named name
// ("set-nx-px.acquire": the lock it belongs to, and what it does).
func NewScript(name string, keyCount int, src string) Script {
	sha := redis.NewScript(keyCount, src).Hash()
	return Script{
		hash:     scriptArg{name: name, value: sha},
		src:      scriptArg{name: name, value: src},
		keyCount: keyCount,
		sha:      sha,
		name:     name,
	}
}

// Hash is the script's SHA1.
func (s Script) Hash() string { return s.sha }

// Name is the script's name.
func (s Script) Name() string { return s.name }

// Do runs the script on c: EVALSHA, then EVAL if the server answers NOSCRIPT.
// The script's SHA1 and its source go as arguments that carry its name
// (ScriptName reads it): a connection wrapper can show the script by name,
// and Redis receives the SHA1 or the source as they are.
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

// scriptArg is a script's SHA1 or source as the first argument of EVALSHA
// or EVAL: redigo (and internal/adapt, for the other clients) writes its
// RedisArg, the value; ScriptName finds the name.
type scriptArg struct{ name, value string }

// RedisArg is the value Redis receives.
func (a scriptArg) RedisArg() any { return a.value }

// ScriptName returns the name of the script that a Script's EVALSHA or
// EVAL carries as its first argument arg, and whether arg is one.
func ScriptName(arg any) (string, bool) {
	a, ok := arg.(scriptArg)
	return a.name, ok
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

// NilWhat names a nil connection source for an error message: "nil", or
// "a nil *redis.Pool" for a typed nil.
func NilWhat(src locklab.ConnSource) string {
	if src == nil {
		return "nil"
	}
	return fmt.Sprintf("a nil %T", src)
}

// Conn takes a connection from src for one operation. The caller closes it.
func Conn(ctx context.Context, src locklab.ConnSource) (redis.Conn, error) {
	c, err := src.GetContext(ctx)
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, lockkit.Unavailable(err)
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
