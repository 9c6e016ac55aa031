// Package wrapconn wraps the redigo connections a strategy gets with hooks
// around every exchange with the server: the harness's scheduler grants
// each command through it, stress crashes clients between two commands,
// and benchmarks count commands.
//
// Every exchange goes through the hook, as one Call: a command, or the
// commands queued by Send together with the Do, Flush or Receive that sends
// them (a pipeline). The real connection is taken from the source at the
// first exchange that reaches it, so a connection whose commands the hook
// holds back or refuses never touches the server.
package wrapconn

import (
	"context"
	"errors"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
)

// ErrClosed is the error of a command on a closed connection.
var ErrClosed = errors.New("wrapconn: connection closed")

// ErrDropped marks the error a Do hook returns for an exchange whose
// connection dropped before the reply came: the connection is then done,
// as a redigo connection is after a failed read (Err returns the error,
// every later exchange fails with it), and its real connection goes back
// to its source at once.
var ErrDropped = errors.New("connection dropped before the reply came")

// Call is one exchange with the server.
type Call struct {
	// Cmd and Args are the command; Cmd is "" for a Flush or a Do("")
	// that only sends the queued commands.
	Cmd  string
	Args []any
	// Queued are the commands queued by Send that go first, each with its
	// name first.
	Queued [][]any
}

// Pipeline reports whether the call sends queued commands (or none but a
// flush).
func (c Call) Pipeline() bool { return c.Cmd == "" || len(c.Queued) > 0 }

// Commands is how many commands the call sends.
func (c Call) Commands() int {
	if c.Cmd == "" {
		return len(c.Queued)
	}
	return len(c.Queued) + 1
}

// Send sends a call on the real connection, bounded by ctx, and returns its
// reply: for a pipeline, the replies of every command in order.
type Send func(ctx context.Context) (any, error)

// Hooks are the hooks of one connection. Each is optional.
type Hooks struct {
	// Do runs each exchange in place of sending it: it calls send (at most
	// once) to send it, or answers without sending. Nil sends every call
	// as is, bounded by the caller's context.
	Do func(ctx context.Context, call Call, send Send) (any, error)
	// Receive runs before a Receive that, with no reply of a pipeline
	// pending, would wait for a message the server pushes (pub/sub); an
	// error answers the Receive instead. Nil waits.
	Receive func(ctx context.Context) error
	// Close runs once, when the connection is closed, before the real
	// connection is.
	Close func()
}

// Source hands out wrapped connections.
type Source struct {
	// Src is where the real connections come from.
	Src locklab.ConnSource
	// Open makes the hooks of each connection handed out; an error refuses
	// the connection. Nil hands out connections without hooks.
	Open func(ctx context.Context) (Hooks, error)
}

// GetContext returns a wrapped connection; the real one is taken from Src
// at its first exchange.
func (s *Source) GetContext(ctx context.Context) (redis.Conn, error) {
	var h Hooks
	if s.Open != nil {
		var err error
		if h, err = s.Open(ctx); err != nil {
			return nil, err
		}
	}
	return &Conn{src: s.Src, hooks: h}, nil
}

// Conn is a wrapped connection. It is not safe for concurrent use, like
// the redigo connections it wraps.
type Conn struct {
	src     locklab.ConnSource
	hooks   Hooks
	real    redis.Conn
	closed  bool
	queued  [][]any
	replies []any
	// err is why the connection is done (ErrDropped).
	err error
}

var (
	_ redis.ConnWithContext = (*Conn)(nil)
	_ redis.ConnWithTimeout = (*Conn)(nil)
)

// Close runs the Close hook and closes the real connection, once.
func (c *Conn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	if c.hooks.Close != nil {
		c.hooks.Close()
	}
	if c.real != nil {
		return c.real.Close()
	}
	return nil
}

// Err is why the connection dropped, else the real connection's error,
// nil before it is taken.
func (c *Conn) Err() error {
	if c.err != nil {
		return c.err
	}
	if c.real != nil {
		return c.real.Err()
	}
	return nil
}

// Do sends one command (with the queued ones) through the hook.
func (c *Conn) Do(cmd string, args ...any) (any, error) {
	return c.DoContext(context.Background(), cmd, args...)
}

// DoWithTimeout is DoContext bounded by timeout.
func (c *Conn) DoWithTimeout(timeout time.Duration, cmd string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.DoContext(ctx, cmd, args...)
}

// DoContext sends one command (with the queued ones) through the hook.
func (c *Conn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if c.err != nil {
		return nil, c.err
	}
	if cmd == "" && len(c.queued) == 0 {
		return nil, nil
	}
	call := Call{Cmd: cmd, Args: args, Queued: c.queued}
	c.queued = nil
	send := func(ctx context.Context) (any, error) { return c.send(ctx, call) }
	if c.hooks.Do == nil {
		return send(ctx)
	}
	v, err := c.hooks.Do(ctx, call, send)
	if errors.Is(err, ErrDropped) {
		c.err = err
		if c.real != nil {
			c.real.Close()
			c.real = nil
		}
	}
	return v, err
}

func (c *Conn) send(ctx context.Context, call Call) (any, error) {
	if c.real == nil {
		rc, err := c.src.GetContext(ctx)
		if err != nil {
			if rc != nil {
				rc.Close()
			}
			return nil, err
		}
		c.real = rc
	}
	for _, q := range call.Queued {
		if err := c.real.Send(q[0].(string), q[1:]...); err != nil {
			return nil, err
		}
	}
	if ctx.Done() == nil {
		// Nothing can cancel it: the plain Do, without a watcher.
		return c.real.Do(call.Cmd, call.Args...)
	}
	return redis.DoContext(c.real, ctx, call.Cmd, call.Args...)
}

// Send queues a command; the queued commands go to the server, in one
// exchange, at the next Do, Flush or Receive.
func (c *Conn) Send(cmd string, args ...any) error {
	if c.closed {
		return ErrClosed
	}
	if c.err != nil {
		return c.err
	}
	c.queued = append(c.queued, append([]any{cmd}, args...))
	return nil
}

// Flush sends the queued commands; Receive returns their replies.
func (c *Conn) Flush() error {
	if len(c.queued) == 0 {
		return nil
	}
	v, err := c.Do("")
	if err != nil {
		return err
	}
	c.replies = append(c.replies, v.([]any)...)
	return nil
}

// Receive returns the next reply of the flushed commands (flushing the
// queued ones first), or, when none is pending, the next message the
// server pushes (pub/sub).
func (c *Conn) Receive() (any, error) {
	return c.ReceiveContext(context.Background())
}

// ReceiveContext is Receive; ctx bounds only the wait for a pushed message.
func (c *Conn) ReceiveContext(ctx context.Context) (any, error) {
	if v, ok, err := c.pending(ctx); ok || err != nil {
		return v, err
	}
	return redis.ReceiveContext(c.real, ctx)
}

// ReceiveWithTimeout is Receive; timeout bounds only the wait for a pushed
// message.
func (c *Conn) ReceiveWithTimeout(timeout time.Duration) (any, error) {
	if v, ok, err := c.pending(context.Background()); ok || err != nil {
		return v, err
	}
	return redis.ReceiveWithTimeout(c.real, timeout)
}

// errNoReply is the error of a Receive with nothing sent.
var errNoReply = errors.New("wrapconn: Receive without a pending reply")

// pending pops the next reply of the flushed commands: ok is false when
// there is none and the caller may wait for a message pushed on the real
// connection.
func (c *Conn) pending(ctx context.Context) (v any, ok bool, err error) {
	if err := c.Flush(); err != nil {
		return nil, false, err
	}
	if len(c.replies) == 0 {
		if c.real == nil {
			return nil, false, errNoReply
		}
		if c.hooks.Receive != nil {
			if err := c.hooks.Receive(ctx); err != nil {
				return nil, false, err
			}
		}
		return nil, false, nil
	}
	v = c.replies[0]
	c.replies = c.replies[1:]
	if e, ok := v.(redis.Error); ok {
		return nil, true, e
	}
	return v, true, nil
}
