package goredis

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab/internal/adapt"
)

// The fast path. A command that needs no connection state (anything but
// WATCH, MULTI, EXEC, DISCARD, UNWATCH and the subscriptions, on a
// connection that has not queued commands with Send) goes straight to
// go-redis as one *redis.Cmd: its arguments in a slice the connection
// reuses, a script's SHA1 or source (a redigo.Argument) converted once per
// Source, the reply normalized only where go-redis's form differs from
// redigo's. On a *redis.Client (standalone or Sentinel failover) it runs on
// one of a few connections the Source keeps from the client (Conn), so
// that it skips the pool's per-command checkout and health check; the
// go-redis hooks of the client as it was when such a connection was taken
// see every command. Any other command, and every command after one of
// them on the same locklab connection, goes through internal/adapt as
// before.

// fastArgs is how many arguments a connection keeps room for: set-nx-px's
// acquire, the longest command of the strategies, has 8 with its name.
const fastArgs = 10

// fastCommand reports whether cmd (as the strategy wrote it) can take the
// fast path: it carries no connection state.
func fastCommand(cmd string) bool {
	switch cmd {
	case "EVALSHA", "EVAL", "SET", "GET", "DEL", "PING", "PEXPIRE", "PTTL", "INCR":
		return true
	case "":
		return false
	}
	switch strings.ToUpper(cmd) {
	case "WATCH", "MULTI", "EXEC", "DISCARD", "UNWATCH":
		return false
	}
	return !strings.HasSuffix(strings.ToUpper(cmd), "SUBSCRIBE")
}

// lowerName is the name go-redis is given: lower case, as its own
// commands are (Cmd.Name lower-cases it, allocating, for an upper-case
// one).
func lowerName(cmd string) string {
	switch cmd {
	case "EVALSHA":
		return "evalsha"
	case "EVAL":
		return "eval"
	case "SET":
		return "set"
	case "GET":
		return "get"
	case "DEL":
		return "del"
	case "PING":
		return "ping"
	}
	return cmd
}

// fast runs one command on the fast path.
func (c *conn) fast(ctx context.Context, cmd string, args []any) (any, error) {
	all := c.args[:0]
	all = append(all, lowerName(cmd))
	for _, a := range args {
		all = append(all, c.b.s.arg(a))
	}
	v, err := c.b.s.process(ctx, c.b.conn, all)
	clear(all) // let the arguments go
	if err != nil {
		if err == redis.Nil {
			return nil, nil
		}
		return nil, convertErr(err)
	}
	switch v.(type) {
	case int64, nil:
		return v, nil
	}
	v = normalize(v)
	if cmd == "EVALSHA" || cmd == "EVAL" {
		return v, nil
	}
	return adapt.StatusReply(strings.ToUpper(cmd), args, v), nil
}

// arg is a as go-redis should write it to match redigo: strings, []byte
// and integers as they are, a redigo.Argument (a script's SHA1 or source)
// by its value, converted once, anything else by its adapt.String.
func (s *Source) arg(a any) any {
	switch a.(type) {
	case string, []byte, int, int64:
		return a
	case redigo.Argument:
		if v, ok := s.argCache.Load(a); ok {
			return v
		}
		v := any(adapt.String(a))
		if s.argCount.Add(1) <= maxCachedArgs {
			s.argCache.Store(a, v)
		}
		return v
	}
	return adapt.String(a)
}

// maxCachedArgs bounds the redigo.Arguments a Source keeps converted: the
// strategies' scripts are a few dozen.
const maxCachedArgs = 256

// process sends one command: on stuck, the connection Stick took, when
// there is one; otherwise on a kept connection, or through the client.
func (s *Source) process(ctx context.Context, stuck *redis.Conn, args []any) (any, error) {
	cmd := redis.NewCmd(ctx, args...)
	if stuck != nil {
		stuck.Process(ctx, cmd)
		return cmd.Result()
	}
	if s.kept == nil {
		s.client.Process(ctx, cmd)
		return cmd.Result()
	}
	kc, ok := s.kept.get()
	if !ok {
		s.client.Process(ctx, cmd)
		return cmd.Result()
	}
	kc.c.Process(ctx, cmd)
	v, err := cmd.Result()
	if err == nil || err == redis.Nil || isNoScript(err) {
		s.kept.put(kc)
		return v, err
	}
	s.kept.drop(kc)
	if !retryable(err) {
		return v, err
	}
	// The kept connection failed before an answer (the server closed it
	// while it sat idle, or restarted): the client tries again on a fresh
	// one, as it would have had the command gone through it.
	cmd = redis.NewCmd(ctx, args...)
	s.client.Process(ctx, cmd)
	return cmd.Result()
}

func isNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOSCRIPT")
}

// retryable reports whether err is a failure of the connection rather
// than an answer or the caller's context.
func retryable(err error) bool {
	var re redis.Error
	return !errors.As(err, &re) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// kept is the few connections of a *redis.Client a Source keeps for the
// fast path, taken with Conn when needed, up to max at once. A kept
// connection goes back to the client's pool, and a fresh one is taken
// (most often the same connection again), when it is next used after a
// tick of maxAge, and right after its first command: go-redis (v9.23)
// peeks at a connection for RESP3 push notifications, a system call and
// some allocations, before and after each command unless the connection
// came back to its pool less than 5 seconds before, and a kept connection
// does not come back until it is given back. The ticks run while the
// Source is used (a timer, rather than a clock read per command: on a
// virtual machine without a usable TSC a clock read is a system call).
// Kept connections idle until the Source is next used; they end with the
// client.
type kept struct {
	client *redis.Client
	max    int

	mu    sync.Mutex
	idle  []keptConn // the most recently used last
	taken int        // connections held, idle or in use

	gen   atomic.Int64 // ticks so far
	used  atomic.Bool  // a get since the last tick
	armed atomic.Bool  // the tick timer runs
	tick  *time.Timer
}

// keptConn is a kept connection and the tick it was taken in.
type keptConn struct {
	c   *redis.Conn
	gen int64
}

// maxAge is how long a kept connection is used before it goes back to
// the client's pool.
const maxAge = time.Second

func newKept(client *redis.Client) *kept {
	k := &kept{client: client, max: max(1, client.Options().PoolSize/4)}
	k.tick = time.AfterFunc(time.Hour, k.advance)
	k.tick.Stop()
	return k
}

// advance is a tick: every kept connection taken before it is due back.
// The ticks stop after one without a use, and start again, with a tick,
// at the next use.
func (k *kept) advance() {
	k.gen.Add(1)
	if k.used.Swap(false) {
		k.tick.Reset(maxAge)
	} else {
		k.armed.Store(false)
	}
}

// get returns a kept connection, taking a new one from the client when
// all are in use and fewer than max are held; ok is false when max are in
// use.
func (k *kept) get() (kc keptConn, ok bool) {
	k.used.Store(true)
	if !k.armed.Load() && k.armed.CompareAndSwap(false, true) {
		k.gen.Add(1)
		k.tick.Reset(maxAge)
	}
	gen := k.gen.Load()
	k.mu.Lock()
	if n := len(k.idle); n > 0 {
		kc = k.idle[n-1]
		k.idle = k.idle[:n-1]
		k.mu.Unlock()
		if kc.gen != gen {
			kc.c.Close()
			kc = keptConn{c: k.client.Conn(), gen: gen}
		}
		return kc, true
	}
	if k.taken >= k.max {
		k.mu.Unlock()
		return kc, false
	}
	k.taken++
	k.mu.Unlock()
	// A new connection may be a new one of the client's too, which never
	// went back to its pool: it goes back after this first command.
	return keptConn{c: k.client.Conn(), gen: gen - 1}, true
}

// put gives kc back to the kept ones.
func (k *kept) put(kc keptConn) {
	k.mu.Lock()
	k.idle = append(k.idle, kc)
	k.mu.Unlock()
}

// drop gives kc, which failed, back to the client.
func (k *kept) drop(kc keptConn) {
	k.mu.Lock()
	k.taken--
	k.mu.Unlock()
	kc.c.Close()
}
