// The Redis store's connection wrapper: the redis.Conn a strategy gets from
// redisStore.source, wrapconn's connections with the scheduler's hook. Every
// command waits for the scheduler's grant, then runs on a real connection
// to the node, and its reply is written into the step's event.

package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/rcmd"
	"github.com/locklab/locklab/internal/tooling/wrapconn"
)

// noPush refuses a Receive that would wait for a pushed message: every
// exchange of a run is a scheduled step.
func noPush(context.Context) error {
	return errors.New("harness: Receive without a pending reply")
}

// conn is the scheduler's side of one connection a strategy gets.
type conn struct {
	h        *harness.Client
	k        *harness.Conn
	st       *redisStore
	node     int
	freeEval bool
	// tx is what the connection's open transaction has queued and the
	// keys it watches (touch.go).
	tx txTouch
}

func (k *conn) close() { k.k.Close() }

// transaction follows the connection's MULTI … EXEC state after call
// (err: its answer's error): a MULTI that succeeded opens a transaction, an
// EXEC or a DISCARD ends it, whatever they answer.
func (k *conn) transaction(call wrapconn.Call, err error) {
	if call.Pipeline() {
		return
	}
	switch {
	case strings.EqualFold(call.Cmd, "MULTI"):
		if err == nil {
			k.k.SetTransaction(true)
		}
	case strings.EqualFold(call.Cmd, "EXEC"), strings.EqualFold(call.Cmd, "DISCARD"):
		k.k.SetTransaction(false)
	}
}

// do sends one command, or one pipeline, once the scheduler grants it. The
// command runs whatever becomes of ctx after the grant: the step is taken.
func (k *conn) do(ctx context.Context, call wrapconn.Call, send wrapconn.Send) (any, error) {
	h, node := k.h, k.node
	k.st.note(call.Args, call.Queued)
	bg := context.Background()
	if k.freeEval && call.Cmd == "EVAL" {
		// The EVAL redigo sends after NOSCRIPT belongs to the step of the
		// EVALSHA: step counts do not depend on the script cache.
		k.freeEval = false
		v, err := send(bg)
		k.k.Continue(redisCommand(call.Cmd, call.Args), recorded(v), recordedErr(err))
		return v, err
	}
	keysOn := 0
	if h.MultiNode() {
		keysOn = node // each node a master of its own
	}
	t := k.touchOf(keysOn, call.Cmd, call.Args, call.Queued, k.k.Transaction())
	text := []string{"MULTI/pipeline"}
	if !call.Pipeline() {
		text = redisCommand(call.Cmd, call.Args)
	}
	s, err := k.k.SendTouching(ctx, node, text, t)
	if err != nil {
		if errors.Is(err, harness.ErrUnreachable) {
			k.transaction(call, err)
		}
		return nil, err
	}
	lose := s.LoseReply()
	var v any
	if strings.EqualFold(call.Cmd, "WAIT") {
		v, err = k.wait(s, func() (any, error) { return send(bg) })
	} else {
		v, err = send(bg)
	}
	if err != nil && isNoScript(err) && call.Cmd == "EVALSHA" {
		k.freeEval = true
	}
	if isRefusedAccess(err) {
		// Not a lock's answer but the server's refusal of the run itself:
		// a history made of such answers would judge nothing.
		h.Fail(fmt.Errorf("harness: %s refused %s: %w", k.st.nodes[node-1].Name(), call.Cmd, err))
	}
	if lose {
		// The server ran the command; the client hears only that its
		// connection dropped, which ends the connection's transaction.
		k.freeEval = false
		k.k.SetTransaction(false)
		s.Reply(recorded(v), recordedErr(err), false)
		return nil, errLostReply
	}
	k.transaction(call, err)
	s.Reply(recorded(v), recordedErr(err), k.freeEval)
	return v, err
}

// errLostReply is what a command whose reply a lose step lost returns: a
// read that met the end of the connection.
var errLostReply = fmt.Errorf("%w: %w", io.ErrUnexpectedEOF, wrapconn.ErrDropped)

// replicaLink is a node whose replica lags until asked to catch up
// (redisnode.Replicated).
type replicaLink interface {
	CatchUp(ctx context.Context) error
	Lag(ctx context.Context) error
}

// wait runs a WAIT (send), the step s. On a node whose replica lags, the
// replica catches up first, so that the master's answer counts it. In a
// failover scenario it is cut off again after the WAIT: there the replica
// misses every write except those a client waited for. Elsewhere it stays
// connected, which changes nothing of those stories and spares a resync per
// WAIT.
func (k *conn) wait(s *harness.Sent, send func() (any, error)) (any, error) {
	rl, ok := k.st.nodes[k.node-1].(replicaLink)
	if !ok {
		return send()
	}
	ctx := k.h.Context()
	if err := rl.CatchUp(ctx); err != nil {
		return nil, fmt.Errorf("harness: the replica of n%d could not catch up: %w", k.node, err)
	}
	v, err := send()
	if k.h.FailsOver() {
		if lerr := rl.Lag(ctx); lerr != nil && err == nil {
			err = fmt.Errorf("harness: cutting the replica of n%d off again: %w", k.node, lerr)
		}
		s.Note("replica caught up")
	}
	return v, err
}

// isRefusedAccess reports a server's refusal of a client's credentials or
// permissions (NOAUTH, WRONGPASS, NOPERM).
func isRefusedAccess(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range []string{"NOAUTH", "WRONGPASS", "NOPERM"} {
		if strings.HasPrefix(string(re), p) {
			return true
		}
	}
	return false
}

// redisCommand is how a history shows a command: its name and arguments.
// A script sent by name (rcmd.Script) shows as that name followed by its
// keys and arguments, without the key count ("EVALSHA set-nx-px.acquire
// lock:k tok 30000"), for EVALSHA and for the EVAL that follows a NOSCRIPT
// answer alike; another script as its SHA1's first 8 digits or <script>.
func redisCommand(cmd string, args []any) []string {
	if len(args) >= 2 && (cmd == "EVALSHA" || cmd == "EVAL") {
		if name, ok := rcmd.ScriptName(args[0]); ok {
			return harness.CommandText(cmd, append([]any{name}, args[2:]...))
		}
	}
	out := []string{cmd}
	for i, a := range args {
		s := harness.FormatValue(a)
		if i == 0 && cmd == "EVALSHA" && len(s) > 8 {
			s = "sha:" + s[:8]
		}
		if i == 0 && cmd == "EVAL" {
			s = "<script>"
		}
		out = append(out, s)
	}
	return out
}

// recorded is a reply as the history records it: the server's error
// replies in it (an EXEC's answer holds one per failed command) as
// ErrorReply.
func recorded(v any) any {
	switch x := v.(type) {
	case redis.Error:
		return harness.ErrorReply(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = recorded(e)
		}
		return out
	}
	return v
}

// recordedErr is an error as the history records it: the server's error
// reply as ErrorReply.
func recordedErr(err error) error {
	if e, ok := err.(redis.Error); ok {
		return harness.ErrorReply(e)
	}
	return err
}

func isNoScript(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re) >= 8 && string(re[:8]) == "NOSCRIPT"
}
