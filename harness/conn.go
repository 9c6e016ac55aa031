// The connection wrapper: the ConnSource and redis.Conn a strategy sees.
// Every command waits for the scheduler's grant, then runs on a real
// connection to the node, and its reply is written into the step's event.

package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

// source is the ConnSource a client sees for one node.
type source struct {
	r    *run
	c    *client
	node int
}

func (s *source) GetContext(ctx context.Context) (redis.Conn, error) {
	s.r.mu.Lock()
	crashed := s.c.crashed
	s.r.mu.Unlock()
	if crashed {
		return nil, errCrashed
	}
	return &conn{src: s}, nil
}

// conn is the redis.Conn a strategy gets: every command waits for the
// scheduler's grant, then runs on a real connection to the node.
type conn struct {
	src      *source
	own      owner
	real     redis.Conn
	freeEval bool
	closed   bool
	sends    [][]any
	replies  []any
}

var _ redis.ConnWithContext = (*conn)(nil)

func (k *conn) Close() error {
	if k.closed {
		return nil
	}
	k.closed = true
	k.src.r.idle(k.src.c, &k.own)
	if k.real != nil {
		return k.real.Close()
	}
	return nil
}

func (k *conn) Err() error {
	if k.real != nil {
		return k.real.Err()
	}
	return nil
}

func (k *conn) Do(cmd string, args ...any) (any, error) {
	return k.DoContext(context.Background(), cmd, args...)
}

// Send queues a command; the queued commands run, in one step, at the next
// Do, Flush or Receive.
func (k *conn) Send(cmd string, args ...any) error {
	k.sends = append(k.sends, append([]any{cmd}, args...))
	return nil
}

func (k *conn) Flush() error {
	if len(k.sends) == 0 {
		return nil
	}
	v, err := k.DoContext(context.Background(), "")
	if err != nil {
		return err
	}
	k.replies = append(k.replies, v.([]any)...)
	return nil
}

func (k *conn) Receive() (any, error) {
	if err := k.Flush(); err != nil {
		return nil, err
	}
	if len(k.replies) == 0 {
		return nil, errors.New("harness: Receive without a pending reply")
	}
	v := k.replies[0]
	k.replies = k.replies[1:]
	if e, ok := v.(redis.Error); ok {
		return nil, e
	}
	return v, nil
}

// ReceiveContext is Receive; the context is not needed for queued replies.
func (k *conn) ReceiveContext(ctx context.Context) (any, error) { return k.Receive() }

// DoContext sends one command once the scheduler grants it.
func (k *conn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	r, c, node := k.src.r, k.src.c, k.src.node
	if k.closed {
		return nil, errors.New("harness: connection closed")
	}
	if cmd == "" && len(k.sends) == 0 {
		return nil, nil
	}
	if k.freeEval && cmd == "EVAL" {
		// The EVAL redigo sends after NOSCRIPT belongs to the step of the
		// EVALSHA: step counts do not depend on the script cache.
		k.freeEval = false
		v, err := k.exec(cmd, args)
		r.mu.Lock()
		if k.lastEvent(c) != nil {
			k.lastEvent(c).Extra = fmtArgs(cmd, args)
			k.lastEvent(c).Reply = fmtReply(v, err)
		}
		r.mu.Unlock()
		return v, err
	}
	label := cmd
	if cmd == "" || len(k.sends) > 0 {
		label = "pipeline"
	}
	q, err := r.submit(ctx, c, &k.own, node, label, args, "")
	if err != nil {
		return nil, err
	}
	// A command of a release that runs while another client holds the
	// lock is watched: the key is read before and after it, and the
	// wrongful-release checker (check.go) judges what changed.
	var watch *client
	var before any
	r.mu.Lock()
	down := r.down[node-1] || c.isolated
	if c.inRelease {
		for _, o := range r.cls {
			if o != c && o.holding && !o.crashed && !o.inRelease {
				watch = o
			}
		}
	}
	r.mu.Unlock()
	if down {
		err = fmt.Errorf("%w: n%d", errUnreachable, node)
		r.reply(q, nil, err)
		return nil, err
	}
	if watch != nil {
		before, _ = r.probeKey(node)
	}
	var v any
	switch {
	case label == "pipeline":
		v, err = k.pipeline(cmd, args)
	case strings.EqualFold(cmd, "WAIT"):
		v, err = k.wait(q, args)
	default:
		v, err = k.exec(cmd, args)
	}
	if err != nil && isNoScript(err) && cmd == "EVALSHA" {
		k.freeEval = true
	}
	r.reply(q, v, err)
	if watch != nil {
		after, _ := r.probeKey(node)
		r.mu.Lock()
		checkReleaseStep(r.hist, q.event, releaseProbe{client: c.id, victim: watch.id, node: node,
			token: watch.lease.Token, victimHolds: watch.holding, before: before, after: after})
		r.mu.Unlock()
	}
	return v, err
}

func (k *conn) lastEvent(c *client) *Event {
	if c.lastEvent < 0 || c.lastEvent >= len(k.src.r.hist.Events) {
		return nil
	}
	return &k.src.r.hist.Events[c.lastEvent]
}

func (k *conn) realConn() (redis.Conn, error) {
	if k.real == nil {
		c, err := k.src.r.slot.pool(k.src.node - 1).GetContext(k.src.r.ctx)
		if err != nil {
			if c != nil {
				c.Close()
			}
			return nil, err
		}
		k.real = c
	}
	return k.real, nil
}

func (k *conn) exec(cmd string, args []any) (any, error) {
	rc, err := k.realConn()
	if err != nil {
		return nil, err
	}
	return rc.Do(cmd, args...)
}

// replicaLink is a node whose replica lags until asked to catch up
// (node.Replicated).
type replicaLink interface {
	CatchUp(ctx context.Context) error
	Lag(ctx context.Context) error
}

// wait runs a WAIT. On a node whose replica lags, the replica catches up
// first, so that the master's answer counts it. In a failover scenario it
// is cut off again after the WAIT: there the replica misses every write
// except those a client waited for. Elsewhere it stays connected, which
// changes nothing of those stories and spares a resync per WAIT.
func (k *conn) wait(q *request, args []any) (any, error) {
	r := k.src.r
	rl, ok := r.slot.nodes[k.src.node-1].(replicaLink)
	if !ok {
		return k.exec("WAIT", args)
	}
	if err := rl.CatchUp(r.ctx); err != nil {
		return nil, fmt.Errorf("harness: the replica of n%d could not catch up: %w", k.src.node, err)
	}
	v, err := k.exec("WAIT", args)
	if r.spec.prepare {
		if lerr := rl.Lag(r.ctx); lerr != nil && err == nil {
			err = fmt.Errorf("harness: cutting the replica of n%d off again: %w", k.src.node, lerr)
		}
		r.mu.Lock()
		e := &r.hist.Events[q.event]
		e.Notes = append(e.Notes, "replica caught up")
		r.mu.Unlock()
	}
	return v, err
}

func (k *conn) pipeline(cmd string, args []any) (any, error) {
	rc, err := k.realConn()
	if err != nil {
		return nil, err
	}
	sends := k.sends
	k.sends = nil
	for _, s := range sends {
		if err := rc.Send(s[0].(string), s[1:]...); err != nil {
			return nil, err
		}
	}
	if cmd == "" {
		return rc.Do("")
	}
	return rc.Do(cmd, args...)
}

func isNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re) >= 8 && string(re[:8]) == "NOSCRIPT"
}

// reply records a granted command's answer in its event.
func (r *run) reply(q *request, v any, err error) {
	r.mu.Lock()
	e := &r.hist.Events[q.event]
	e.Reply = fmtReply(v, err)
	q.c.changed = time.Now()
	if r.spec.multi {
		// Fan-out goroutines may keep their connection open: count them as
		// idle once the answer is in; the quiet period covers the rest.
		if q.owner.active {
			q.owner.active = false
			q.c.active--
		}
	}
	r.mu.Unlock()
	r.notify()
}

// probeScript reads a lock key whatever its type: a string's value, or the
// fields of a hash (a re-entrant lock: its holder's id).
var probeScript = redis.NewScript(1, `
if redis.call('type', KEYS[1])['ok'] == 'hash' then
  return table.concat(redis.call('hkeys', KEYS[1]), ',')
end
return redis.call('get', KEYS[1])`)

// probeKey reads the lock key on node (1-based) outside the schedule.
func (r *run) probeKey(node int) (any, error) {
	c, err := r.slot.pool(node - 1).GetContext(r.ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return probeScript.Do(c, r.spec.key)
}
