// The connection wrapper: the ConnSource and redis.Conn a strategy sees,
// wrapconn's connections with the scheduler's hook. Every command waits for
// the scheduler's grant, then runs on a real connection to the node, and
// its reply is written into the step's event.

package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/wrapconn"
)

// source is the ConnSource client c sees for node (1-based): its
// connections refuse to open once c has crashed, and send each command
// through conn.do.
func (r *run) source(c *client, node int) locklab.ConnSource {
	return &wrapconn.Source{
		Src: slotSource{r: r, node: node},
		Open: func(context.Context) (wrapconn.Hooks, error) {
			r.mu.Lock()
			crashed := c.crashed
			r.mu.Unlock()
			if crashed {
				return wrapconn.Hooks{}, errCrashed
			}
			k := &conn{r: r, c: c, node: node}
			return wrapconn.Hooks{Do: k.do, Receive: noPush, Close: k.close}, nil
		},
	}
}

// slotSource hands out real connections to a node of the run's slot, from
// the node's current pool (a kill or restart replaces it), for as long as
// the run lasts.
type slotSource struct {
	r    *run
	node int
}

func (s slotSource) GetContext(context.Context) (redis.Conn, error) {
	return s.r.slot.pool(s.node - 1).GetContext(s.r.ctx)
}

// noPush refuses a Receive that would wait for a pushed message: every
// exchange of a run is a scheduled step.
func noPush(context.Context) error {
	return errors.New("harness: Receive without a pending reply")
}

// conn is the scheduler's side of one connection a strategy gets.
type conn struct {
	r        *run
	c        *client
	node     int
	own      owner
	freeEval bool
}

func (k *conn) close() {
	k.r.mu.Lock()
	k.own.multi = false
	k.r.mu.Unlock()
	k.r.idle(k.c, &k.own)
}

// transaction follows the connection's MULTI … EXEC state after call
// (err: its answer's error): a MULTI that succeeded opens a transaction, an
// EXEC or a DISCARD ends it, whatever they answer.
func (k *conn) transaction(call wrapconn.Call, err error) {
	if call.Pipeline() {
		return
	}
	k.r.mu.Lock()
	defer k.r.mu.Unlock()
	switch {
	case strings.EqualFold(call.Cmd, "MULTI"):
		k.own.multi = k.own.multi || err == nil
	case strings.EqualFold(call.Cmd, "EXEC"), strings.EqualFold(call.Cmd, "DISCARD"):
		k.own.multi = false
	}
}

// do sends one command, or one pipeline, once the scheduler grants it. The
// command runs whatever becomes of ctx after the grant: the step is taken.
func (k *conn) do(ctx context.Context, call wrapconn.Call, send wrapconn.Send) (any, error) {
	r, c, node := k.r, k.c, k.node
	bg := context.Background()
	if k.freeEval && call.Cmd == "EVAL" {
		// The EVAL redigo sends after NOSCRIPT belongs to the step of the
		// EVALSHA: step counts do not depend on the script cache.
		k.freeEval = false
		v, err := send(bg)
		r.mu.Lock()
		if k.lastEvent(c) != nil {
			k.lastEvent(c).Extra = fmtArgs(call.Cmd, call.Args)
			k.lastEvent(c).Reply = fmtReply(v, err)
		}
		r.mu.Unlock()
		if r.spec.multi {
			r.idle(c, &k.own) // the step is over: see reply
		}
		return v, err
	}
	label := call.Cmd
	if call.Pipeline() {
		label = "pipeline"
	}
	q, err := r.submit(ctx, c, &k.own, node, label, call.Args, "")
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
		k.transaction(call, err)
		r.reply(q, nil, err, false)
		return nil, err
	}
	if watch != nil {
		before, _ = r.probeKey(node)
	}
	var v any
	if strings.EqualFold(call.Cmd, "WAIT") {
		v, err = k.wait(q, func() (any, error) { return send(bg) })
	} else {
		v, err = send(bg)
	}
	if err != nil && isNoScript(err) && call.Cmd == "EVALSHA" {
		k.freeEval = true
	}
	k.transaction(call, err)
	r.reply(q, v, err, k.freeEval)
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
	if c.lastEvent < 0 || c.lastEvent >= len(k.r.hist.Events) {
		return nil
	}
	return &k.r.hist.Events[c.lastEvent]
}

// replicaLink is a node whose replica lags until asked to catch up
// (node.Replicated).
type replicaLink interface {
	CatchUp(ctx context.Context) error
	Lag(ctx context.Context) error
}

// wait runs a WAIT (send). On a node whose replica lags, the replica
// catches up first, so that the master's answer counts it. In a failover
// scenario it is cut off again after the WAIT: there the replica misses
// every write except those a client waited for. Elsewhere it stays
// connected, which changes nothing of those stories and spares a resync per
// WAIT.
func (k *conn) wait(q *request, send func() (any, error)) (any, error) {
	r := k.r
	rl, ok := r.slot.nodes[k.node-1].(replicaLink)
	if !ok {
		return send()
	}
	if err := rl.CatchUp(r.ctx); err != nil {
		return nil, fmt.Errorf("harness: the replica of n%d could not catch up: %w", k.node, err)
	}
	v, err := send()
	if r.spec.prepare {
		if lerr := rl.Lag(r.ctx); lerr != nil && err == nil {
			err = fmt.Errorf("harness: cutting the replica of n%d off again: %w", k.node, lerr)
		}
		r.mu.Lock()
		e := &r.hist.Events[q.event]
		e.Notes = append(e.Notes, "replica caught up")
		r.mu.Unlock()
	}
	return v, err
}

func isNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re) >= 8 && string(re[:8]) == "NOSCRIPT"
}

// reply records a granted command's answer in its event. more says the
// command's step goes on (the EVAL that follows a NOSCRIPT): the client
// stays running until it is done.
func (r *run) reply(q *request, v any, err error, more bool) {
	r.mu.Lock()
	e := &r.hist.Events[q.event]
	e.Reply = fmtReply(v, err)
	q.c.changed = time.Now()
	if r.spec.multi {
		// Fan-out goroutines may keep their connection open: count them as
		// idle once the answer is in; the quiet period covers the rest.
		if q.owner.active && !more {
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
