package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/fanout"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/lockkit"
)

// op is the command a round sends to each node.
type op uint8

const (
	opSet     op = iota // SET key token NX PX ms
	opRelease           // release.lua key token
	opExtend            // extend.lua key token ms
)

// status is what one node made of a round's command.
type status uint8

const (
	stSkipped  status = iota // nothing was sent
	stGranted                // SET answered OK, or a script answered 1
	stRefused                // SET answered nil, or a script answered 0
	stFailed                 // no usable answer: the command may or may not have run
	stErrReply               // the server answered with an error: the command did not run
	stUnsent                 // no connection in time (or ctx ended first): the command was not sent
)

type reply struct {
	st  status
	err error
}

// SetupTimeout bounds a connection set-up (a dial, AUTH, a TLS handshake)
// that a round stopped waiting for, when the round's own deadline is not
// longer: it is the deadline of the context the set-up is given. The
// connection source's own timeouts (a PoolOptions.DialTimeout) apply as
// well, and alone where the source does not honour the context (redigo's
// TLS handshake).
const SetupTimeout = 2 * time.Second

// round is one parallel step: the same command to every selected node, one
// goroutine per node, each through its own connection source. Rounds are
// pooled per Redlock so that a cycle allocates little beyond what the Redis
// client needs.
type round struct {
	r       *Redlock
	op      op
	args    []any
	replies []reply
	send    []bool
	fan     *fan // nil when the last run left a node behind
}

// fan is what a run shares with its node goroutines. A node whose
// connection was still being set up when the run's deadline passed is left
// to finish, and keeps its fan: the next run takes a new one.
type fan struct {
	res   chan result
	state []atomic.Int32
	// The run's command, written before its goroutines start; a fan is
	// reused only once every goroutine of the run before has sent its
	// result, the last thing it does with the fan.
	nodes      []locklab.ConnSource
	op         op
	args       []any
	ctx, setup context.Context
}

// The states of a node in a run.
const (
	nodeSettingUp int32 = iota // getting its connection
	nodeAnswering              // connected, or failed to: its result is coming
	nodeLeft                   // the run stopped waiting for its connection
	nodeDone                   // its result is in
)

type result struct {
	node int
	rep  reply
}

// newRound takes a round from the pool, set up for op.
func (r *Redlock) newRound(o op, key, token string, ms int64) *round {
	rd := r.rounds.Get().(*round)
	rd.reset(o, key, token, ms)
	return rd
}

func (r *Redlock) putRound(rd *round) {
	rd.args = nil
	clear(rd.replies)
	r.rounds.Put(rd)
}

// reset sets up the arguments of op. They are allocated afresh for every
// round and never written again: when a node times out, the client library
// may still be reading them after the round has returned.
func (rd *round) reset(o op, key, token string, ms int64) {
	rd.op = o
	switch o {
	case opSet:
		rd.args = []any{key, token, "NX", "PX", ms}
	case opRelease:
		rd.args = []any{key, token}
	case opExtend:
		rd.args = []any{key, token, ms}
	}
}

// run sends the round's command to every node (all) or to those marked in
// send, in parallel, and waits for every answer or failure, but no longer
// than ctx lasts. Replies of nodes not sent to are marked skipped.
//
// ctx bounds each node's command. It bounds the wait for a node's
// connection too, but not the connection's set-up: a set-up that has not
// finished by then (a cold dial, AUTH, a TLS handshake, or a source that
// does not honour ctx while setting up) is left to finish on its own, under
// a context whose deadline is SetupTimeout away (or ctx's, if later), and
// its connection goes back to its source for the next round. Such a node is
// marked unsent. A node that is connected when ctx ends is waited for: its
// command honours ctx.
func (rd *round) run(ctx context.Context, all bool) {
	n := 0
	for i := range rd.send {
		if all {
			rd.send[i] = true
		}
		if rd.send[i] {
			n++
		}
	}
	// Each command says how many the round sends (a scheduler that takes
	// them one at a time, as the harness does, waits for them all).
	ctx = fanout.With(ctx, n)
	bound := SetupTimeout
	if dl, ok := ctx.Deadline(); ok {
		bound = max(bound, time.Until(dl))
	}
	setup, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	f := rd.fan
	if f == nil {
		f = &fan{res: make(chan result, len(rd.send)), state: make([]atomic.Int32, len(rd.send)), nodes: rd.r.nodes}
		rd.fan = f
	}
	f.op, f.args, f.ctx, f.setup = rd.op, rd.args, ctx, setup
	for i := range rd.send {
		if !rd.send[i] {
			rd.replies[i] = reply{}
			continue
		}
		f.state[i].Store(nodeSettingUp)
		go f.node(i)
	}
	pending, left := n, 0
	take := func(x result) {
		if f.state[x.node].Load() == nodeLeft {
			left-- // a node given up on below has finished setting up
			return
		}
		f.state[x.node].Store(nodeDone)
		rd.replies[x.node] = x.rep
		pending--
	}
	done := ctx.Done()
	for pending > 0 {
		select {
		case x := <-f.res:
			take(x)
		case <-done:
			done = nil
			for i := range rd.send {
				if rd.send[i] && f.state[i].CompareAndSwap(nodeSettingUp, nodeLeft) {
					rd.replies[i] = reply{st: stUnsent, err: lockkit.Unavailable(
						fmt.Errorf("no connection yet (its set-up goes on for the next round): %w", context.Cause(ctx)))}
					pending--
					left++
				}
			}
		}
	}
	if left == 0 {
		cancel()
		return
	}
	// Nodes are still setting up: their results go to this fan, which the
	// next run must not read.
	rd.fan = nil
	go reap(f.res, left, setup, cancel)
}

// reap waits for the n nodes a run left behind to finish setting up (or
// for their set-up's bound), then releases the set-up context.
func reap(res <-chan result, n int, setup context.Context, cancel context.CancelFunc) {
	defer cancel()
	for ; n > 0; n-- {
		select {
		case <-res:
		case <-setup.Done():
			return
		}
	}
}

// node gets node i's connection, bounded by f.setup, and sends the
// command, bounded by f.ctx, unless the run has stopped waiting meanwhile; a
// connection the run no longer wants goes back to its source. Sending its
// result is the last thing it does with f.
func (f *fan) node(i int) {
	ctx := f.ctx
	c, err := rcmd.Conn(f.setup, f.nodes[i])
	if !f.state[i].CompareAndSwap(nodeSettingUp, nodeAnswering) {
		if c != nil {
			c.Close()
		}
		f.res <- result{node: i}
		return
	}
	var rep reply
	switch {
	case err != nil:
		rep = reply{st: stFailed, err: err}
	case ctx.Err() != nil:
		c.Close()
		rep = reply{st: stUnsent, err: lockkit.Unavailable(context.Cause(ctx))}
	default:
		rep = call(ctx, c, f.op, f.args)
		c.Close()
	}
	f.res <- result{node: i, rep: rep}
}

// call sends the one command o with args on c.
func call(ctx context.Context, c redis.Conn, o op, args []any) reply {
	var (
		v   any
		err error
	)
	switch o {
	case opSet:
		v, err = rcmd.Do(ctx, c, "SET", args...)
	case opRelease:
		v, err = releaseScript.Do(ctx, c, args...)
	case opExtend:
		v, err = extendScript.Do(ctx, c, args...)
	}
	switch {
	case err != nil && isAnswer(err):
		return reply{st: stErrReply, err: err}
	case err != nil:
		return reply{st: stFailed, err: err}
	case v == nil:
		return reply{st: stRefused}
	}
	switch v := v.(type) {
	case string:
		if v == "OK" && o == opSet {
			return reply{st: stGranted}
		}
	case int64:
		if o != opSet && (v == 0 || v == 1) {
			if v == 1 {
				return reply{st: stGranted}
			}
			return reply{st: stRefused}
		}
	}
	return reply{st: stFailed, err: fmt.Errorf("unexpected reply %#v", v)}
}

// count tallies the replies: done (granted), gone (refused), failed (no
// usable answer or an error reply).
func (rd *round) count() (done, gone, fail int) {
	for _, p := range rd.replies {
		switch p.st {
		case stGranted:
			done++
		case stRefused:
			gone++
		case stFailed, stErrReply, stUnsent:
			fail++
		}
	}
	return
}

// nodeErrors joins a *NodeError for every node that failed.
func (rd *round) nodeErrors() error {
	var errs []error
	for i, p := range rd.replies {
		if p.err != nil {
			errs = append(errs, &NodeError{Node: i, Addr: rd.r.addrs[i], Err: p.err})
		}
	}
	return errors.Join(errs...)
}

// tally describes a failed acquire that others won.
func (rd *round) tally(granted, refused, fail int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "refused by %d of %d nodes, where other clients hold the key; this attempt got %d, %d needed",
		refused, len(rd.replies), granted, rd.r.quorum)
	if fail > 0 {
		fmt.Fprintf(&b, "; %d failed:", fail)
		for i, p := range rd.replies {
			if p.err != nil {
				fmt.Fprintf(&b, " [%v]", &NodeError{Node: i, Addr: rd.r.addrs[i], Err: p.err})
			}
		}
	}
	return b.String()
}
