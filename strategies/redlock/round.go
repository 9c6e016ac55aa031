package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/locklab/locklab/internal/fanout"
	"github.com/locklab/locklab/internal/rcmd"
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
)

type reply struct {
	st  status
	err error
}

// round is one parallel step: the same command to every selected node, one
// goroutine per node (the first selected node runs on the caller's), each
// through its own connection source. Rounds are pooled per Redlock so that a
// cycle allocates little beyond what the Redis client needs.
type round struct {
	r       *Redlock
	ctx     context.Context
	op      op
	args    []any
	wg      sync.WaitGroup
	replies []reply
	send    []bool
}

// newRound takes a round from the pool, set up for op.
func (r *Redlock) newRound(o op, key, token string, ms int64) *round {
	rd := r.rounds.Get().(*round)
	rd.reset(o, key, token, ms)
	return rd
}

func (r *Redlock) putRound(rd *round) {
	rd.ctx = nil
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
// send, in parallel, and waits for every answer or failure; ctx bounds each
// node. Replies of nodes not sent to are marked skipped.
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
	rd.ctx = fanout.With(ctx, n)
	first := -1
	for i := range rd.send {
		if !rd.send[i] {
			rd.replies[i] = reply{}
			continue
		}
		if first < 0 {
			first = i
			continue
		}
		rd.wg.Add(1)
		go rd.node(i)
	}
	if first >= 0 {
		rd.replies[first] = rd.call(first)
	}
	rd.wg.Wait()
}

func (rd *round) node(i int) {
	rd.replies[i] = rd.call(i)
	rd.wg.Done()
}

// call sends the round's one command to node i.
func (rd *round) call(i int) reply {
	c, err := rcmd.Conn(rd.ctx, rd.r.nodes[i])
	if err != nil {
		return reply{st: stFailed, err: err}
	}
	args := rd.args
	var v any
	switch rd.op {
	case opSet:
		v, err = rcmd.Do(rd.ctx, c, "SET", args...)
	case opRelease:
		v, err = releaseScript.Do(rd.ctx, c, args...)
	case opExtend:
		v, err = extendScript.Do(rd.ctx, c, args...)
	}
	c.Close()
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
		if v == "OK" && rd.op == opSet {
			return reply{st: stGranted}
		}
	case int64:
		if rd.op != opSet && (v == 0 || v == 1) {
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
		case stFailed, stErrReply:
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
