// Package adapt is what the client adapters (adapters/goredis,
// adapters/rueidis) share: a redigo redis.Conn that sends its commands
// through another client, and the rules that turn that client's replies into
// the ones redigo would have given. An adapter supplies a Backend (one
// command in, one normalized reply out) and gets a connection the strategies
// use as they use a redigo pool's.
//
// Replies follow redigo's RESP2 conventions whatever protocol the client
// speaks: a bulk string is []byte, a status ("OK", "PONG", "QUEUED") is
// string, an integer is int64, a nil reply is nil, an array is []any, an
// error reply is redis.Error. RESP3 types are folded back: a map becomes the
// flat key/value array (in key order where the client keeps no order), a
// boolean becomes 1 or 0, a double its decimal text.
// Neither go-redis nor rueidis tells a status from a bulk string, so a
// Backend returns every string as []byte and Conn turns it back into a
// status where the command answers with one (StatusReply).
package adapt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Backend sends commands through a client.
type Backend interface {
	// Do sends one command and returns its reply normalized (strings as
	// []byte; see the package documentation). A Redis error reply is
	// returned as a redis.Error value in err; a nil reply is (nil, nil).
	Do(ctx context.Context, cmd string, args []any) (any, error)
	// Dedicate returns a Backend bound to one connection of the client, for
	// a command sequence that must stay on one connection (WATCH, MULTI ...
	// EXEC), and the function that gives the connection back.
	Dedicate(ctx context.Context) (Backend, func(), error)
}

// ErrPubSub is the error of a SUBSCRIBE, PSUBSCRIBE or SSUBSCRIBE sent
// through an adapter: subscriptions need the client's own pub/sub API.
var ErrPubSub = errors.New("locklab adapter: pub/sub is not supported on adapted connections; a Notifier subscribes through the client's own pub/sub (the adapter's Source is a locklab.Subscriber)")

// errClosed is the error of a connection used after Close.
var errClosed = errors.New("locklab adapter: connection closed")

// Conn is a redigo redis.Conn over a Backend. Commands go through the shared
// client, one call each, until a WATCH or MULTI: from then on until Close
// they go through a dedicated connection. Send, Flush and Receive queue
// commands and send them in order at Flush. A Conn is used by one goroutine
// at a time, as redigo's connections are.
type Conn struct {
	b       Backend
	shared  Backend
	release func()
	// queued are the commands between MULTI and EXEC, whose replies EXEC
	// returns in order.
	queued   []bool
	inMulti  bool
	watching bool
	pending  []pending
	replies  []reply
	err      error
}

type pending struct {
	cmd  string
	args []any
}

type reply struct {
	v   any
	err error
}

// NewConn returns a connection over b.
func NewConn(b Backend) *Conn {
	return &Conn{b: b, shared: b}
}

var (
	_ redis.Conn            = (*Conn)(nil)
	_ redis.ConnWithContext = (*Conn)(nil)
	_ redis.ConnWithTimeout = (*Conn)(nil)
)

// Close gives a dedicated connection back, after DISCARD or UNWATCH when a
// transaction or a watch is still open on it. The Conn must not be used
// after Close.
func (c *Conn) Close() error {
	if c.err == errClosed {
		return errClosed
	}
	if c.release != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if c.inMulti {
			c.b.Do(ctx, "DISCARD", nil)
		} else if c.watching {
			c.b.Do(ctx, "UNWATCH", nil)
		}
		cancel()
		c.release()
		c.release = nil
	}
	c.b, c.shared, c.pending, c.replies, c.err = nil, nil, nil, nil, errClosed
	return nil
}

// Err returns a non-nil error when the connection is not usable.
func (c *Conn) Err() error { return c.err }

// Do sends one command with no deadline of its own (the client's timeouts
// apply).
func (c *Conn) Do(cmd string, args ...any) (any, error) {
	return c.DoContext(context.Background(), cmd, args...)
}

// DoWithTimeout sends one command, bounded by timeout.
func (c *Conn) DoWithTimeout(timeout time.Duration, cmd string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.DoContext(ctx, cmd, args...)
}

// DoContext sends one command, bounded by ctx. As with redigo, an empty cmd
// flushes the commands queued by Send and returns the last reply.
func (c *Conn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	if c.err != nil {
		return nil, c.err
	}
	if cmd == "" {
		if err := c.flush(ctx); err != nil {
			return nil, err
		}
		var last reply
		for _, r := range c.replies {
			if last.err == nil {
				last = r
			}
		}
		c.replies = c.replies[:0]
		return last.v, last.err
	}
	if len(c.pending) > 0 || len(c.replies) > 0 {
		// redigo sends the queued commands first and returns the
		// reply of this one.
		if err := c.flush(ctx); err != nil {
			return nil, err
		}
		c.replies = c.replies[:0]
	}
	return c.do(ctx, cmd, args)
}

// Send queues a command for Flush.
func (c *Conn) Send(cmd string, args ...any) error {
	if c.err != nil {
		return c.err
	}
	if isSubscribe(cmd) {
		return ErrPubSub
	}
	c.pending = append(c.pending, pending{cmd, args})
	return nil
}

// Flush sends the queued commands, in order.
func (c *Conn) Flush() error { return c.flush(context.Background()) }

func (c *Conn) flush(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	for i, p := range c.pending {
		v, err := c.do(ctx, p.cmd, p.args)
		var re redis.Error
		if err != nil && !errors.As(err, &re) {
			// Not an answer: the ones left are not sent.
			for range len(c.pending) - i {
				c.replies = append(c.replies, reply{nil, err})
			}
			c.pending = c.pending[:0]
			return err
		}
		c.replies = append(c.replies, reply{v, err})
	}
	c.pending = c.pending[:0]
	return nil
}

// Receive returns the reply of the oldest command sent and not yet received.
func (c *Conn) Receive() (any, error) { return c.ReceiveContext(context.Background()) }

// ReceiveWithTimeout is Receive bounded by timeout.
func (c *Conn) ReceiveWithTimeout(timeout time.Duration) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.ReceiveContext(ctx)
}

// ReceiveContext is Receive bounded by ctx. Commands queued by Send and not
// yet flushed are flushed first.
func (c *Conn) ReceiveContext(ctx context.Context) (any, error) {
	if c.err != nil {
		return nil, c.err
	}
	if len(c.replies) == 0 {
		if err := c.flush(ctx); err != nil {
			return nil, err
		}
	}
	if len(c.replies) == 0 {
		return nil, errors.New("locklab adapter: Receive with no command sent (pub/sub is not supported on adapted connections)")
	}
	r := c.replies[0]
	c.replies = c.replies[1:]
	return r.v, r.err
}

// do sends one command, moving to a dedicated connection at the first WATCH
// or MULTI and following the transaction's state.
func (c *Conn) do(ctx context.Context, cmd string, args []any) (any, error) {
	if isSubscribe(cmd) {
		return nil, ErrPubSub
	}
	name := strings.ToUpper(cmd)
	if c.inMulti && name != "EXEC" && name != "DISCARD" && name != "MULTI" && name != "WATCH" {
		v, err := c.b.Do(ctx, cmd, args)
		if err != nil {
			return nil, err
		}
		c.queued = append(c.queued, IsStatus(name, args))
		return toStatus(v), nil
	}
	switch name {
	case "WATCH", "MULTI":
		if c.release == nil {
			b, release, err := c.shared.Dedicate(ctx)
			if err != nil {
				return nil, err
			}
			c.b, c.release = b, release
		}
	}
	v, err := c.b.Do(ctx, cmd, args)
	switch name {
	case "WATCH":
		c.watching = c.watching || err == nil
	case "UNWATCH":
		c.watching = false
	case "MULTI":
		if err == nil {
			c.inMulti, c.queued = true, c.queued[:0]
		}
	case "EXEC", "DISCARD":
		queued := c.queued
		c.inMulti, c.watching, c.queued = false, false, c.queued[:0]
		if name == "EXEC" {
			if vs, ok := v.([]any); ok && err == nil {
				for i := range vs {
					if i < len(queued) && queued[i] {
						vs[i] = toStatus(vs[i])
					}
				}
			}
			return v, err
		}
	}
	if err != nil {
		return nil, err
	}
	return StatusReply(name, args, v), nil
}

func isSubscribe(cmd string) bool {
	return strings.HasSuffix(strings.ToUpper(cmd), "SUBSCRIBE")
}

// statusCommands answer with a status reply ("+OK") in every form.
var statusCommands = map[string]bool{
	"AUTH": true, "BGREWRITEAOF": true, "BGSAVE": true, "DISCARD": true,
	"FLUSHALL": true, "FLUSHDB": true, "HMSET": true, "LSET": true,
	"LTRIM": true, "MIGRATE": true, "MSET": true, "MULTI": true,
	"PFMERGE": true, "PSETEX": true, "QUIT": true, "READONLY": true,
	"READWRITE": true, "RENAME": true, "REPLICAOF": true, "RESET": true,
	"RESTORE": true, "SAVE": true, "SELECT": true, "SETEX": true,
	"SHUTDOWN": true, "SLAVEOF": true, "SWAPDB": true, "TYPE": true,
	"UNWATCH": true, "WATCH": true, "DEBUG": true,
}

// IsStatus reports whether the command name (upper case) with args answers
// with a status reply rather than a bulk string.
func IsStatus(name string, args []any) bool {
	if statusCommands[name] {
		return true
	}
	switch name {
	case "SET":
		for _, a := range args {
			if s, ok := a.(string); ok && strings.EqualFold(s, "GET") {
				return false
			}
		}
		return true
	case "PING":
		return len(args) == 0
	case "CONFIG":
		return !subIs(args, "GET")
	case "SCRIPT":
		return !subIs(args, "LOAD")
	case "CLIENT":
		return subIs(args, "SETNAME") || subIs(args, "PAUSE") || subIs(args, "UNPAUSE") ||
			subIs(args, "REPLY") || subIs(args, "SETINFO") || subIs(args, "NO-EVICT") || subIs(args, "NO-TOUCH")
	case "ACL":
		return subIs(args, "SETUSER") || subIs(args, "LOAD") || subIs(args, "SAVE")
	}
	return false
}

func subIs(args []any, sub string) bool {
	if len(args) == 0 {
		return false
	}
	s, ok := args[0].(string)
	return ok && strings.EqualFold(s, sub)
}

// StatusReply turns v, a reply normalized with strings as []byte, into the
// string redigo gives for a status when the command (name in upper case,
// with args) answers with one.
func StatusReply(name string, args []any, v any) any {
	if IsStatus(name, args) {
		return toStatus(v)
	}
	return v
}

func toStatus(v any) any {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return v
}

// String formats one command argument as redigo writes it: strings and
// []byte as they are, numbers in decimal, a bool as 1 or 0, nil as "", a
// redis.Argument as its RedisArg, anything else with fmt.Sprint.
func String(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case int16:
		return strconv.FormatInt(int64(v), 10)
	case int8:
		return strconv.FormatInt(int64(v), 10)
	case uint:
		return strconv.FormatUint(uint64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case uint16:
		return strconv.FormatUint(uint64(v), 10)
	case uint8:
		return strconv.FormatUint(uint64(v), 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	case bool:
		if v {
			return "1"
		}
		return "0"
	case nil:
		return ""
	case redis.Argument:
		return String(v.RedisArg())
	default:
		return fmt.Sprint(v)
	}
}

// Args returns args in the forms every client writes as redigo does:
// strings, []byte, int64 and float64 stay, everything else becomes its
// String. It returns args itself when nothing needs changing.
func Args(args []any) []any {
	for i, a := range args {
		switch a.(type) {
		case string, []byte, int, int64:
			continue
		}
		out := make([]any, len(args))
		copy(out, args[:i])
		for j := i; j < len(args); j++ {
			switch v := args[j].(type) {
			case string, []byte, int, int64:
				out[j] = v
			default:
				out[j] = String(v)
			}
		}
		return out
	}
	return args
}

// KeyRange returns where the keys are among args (the arguments after the
// command name), args[from:to], for a client that routes by key slot:
// EVAL-style commands name their key count, a few commands take only keys,
// the ones with no key give an empty range, and the others take one key
// first.
func KeyRange(name string, args []any) (from, to int) {
	switch name {
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
		if len(args) < 2 {
			return 0, 0
		}
		n, err := strconv.Atoi(String(args[1]))
		if err != nil || n < 0 || 2+n > len(args) {
			return 0, 0
		}
		return 2, 2 + n
	case "DEL", "UNLINK", "EXISTS", "WATCH", "MGET", "TOUCH":
		return 0, len(args)
	case "PING", "MULTI", "EXEC", "DISCARD", "UNWATCH", "WAIT", "WAITAOF",
		"INFO", "SCRIPT", "CONFIG", "CLIENT", "PUBLISH", "SELECT", "FLUSHALL",
		"FLUSHDB", "DBSIZE", "TIME", "ECHO", "AUTH", "HELLO", "ACL", "ROLE",
		"REPLICAOF", "SLAVEOF", "DEBUG", "LASTSAVE", "SAVE", "BGSAVE",
		"SHUTDOWN", "COMMAND", "FUNCTION", "QUIT", "RESET", "SWAPDB":
		return 0, 0
	}
	if len(args) == 0 {
		return 0, 0
	}
	return 0, 1
}

// Blocking reports whether the command (upper case) may block on the server
// for a while, so that a client multiplexing commands on one connection
// should send it on a connection of its own.
func Blocking(name string) bool {
	switch name {
	case "WAIT", "WAITAOF", "BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH",
		"BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP", "XREAD", "XREADGROUP":
		return true
	}
	return false
}
