// A run's client as its store sees it: the Client a store's connections
// submit each operation through (Send, SendTouching), its Conn for
// operations that share a connection's state (a transaction), and the
// Sent step whose reply the store hands back.

package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/locklab/locklab"
)

// ErrStopped is what a store's client gets for an operation once its
// run is over.
var ErrStopped = errStopped

// ErrUnscheduled is what a run fails with when its lock sends a request
// the run cannot schedule: one from a goroutine that outlived the call
// that started it, after the client's program had ended.
var ErrUnscheduled = errors.New("a request the run could not schedule")

// ErrCrashed is what a crashed client's store gets for an operation, and
// where it would open a connection.
var ErrCrashed = errCrashed

// ErrUnreachable is what an operation to a node the run took down, or
// that a partition cut the client off from, fails with (wrapped, with the
// node's name).
var ErrUnreachable = errUnreachable

// Client is a run's client as its store sees it.
type Client struct {
	r *run
	c *client
}

// ID is the client's number: 1 for c1.
func (c *Client) ID() int { return c.c.id }

// Isolated reports whether a partition cut the client off (isolate).
func (c *Client) Isolated() bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.c.isolated
}

// Crashed reports whether the client crashed.
func (c *Client) Crashed() bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.c.crashed
}

// Silent reports whether the client's process sends nothing now, not
// even a heartbeat: it crashed, a partition cut it off, or its whole
// process is paused (pause, or a sleep step).
func (c *Client) Silent() bool {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.c.crashed || c.c.isolated || c.c.paused || c.c.sleeping
}

// Holding returns the client's lease while it holds the lock.
func (c *Client) Holding() (locklab.Lease, bool) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.c.lease, c.c.holding
}

// MultiNode reports whether the client's strategy locks on several
// independent nodes at once (Redlock): the store gives it one connection
// source per node, and each of its steps ends when its answer is in.
func (c *Client) MultiNode() bool { return c.r.spec.multi }

// FailsOver reports whether the run's scenario fails a node over to its
// replica: there the replica misses every write but those a client waits
// for (Redis's WAIT).
func (c *Client) FailsOver() bool { return c.r.spec.prepare }

// Context is the run's context: a store's connections to its servers
// last as long as it does.
func (c *Client) Context() context.Context { return c.r.ctx }

// Locker is the strategy the client runs (nil before it is built).
func (c *Client) Locker() locklab.Locker { return c.c.locker }

// Wait says that the client waits for an event of its store's (a watch's
// notification, say) and sends nothing until it comes: the scheduler runs
// the other clients meanwhile. It ends with the client's next operation
// or Wake. The store calls it before it ends the step after which the
// client waits (Sent.Done); what, when not "", says in that step's notes
// what the client waits for.
func (c *Client) Wait(what string) {
	c.r.mu.Lock()
	c.c.waiting = true
	if what != "" {
		c.r.noteLocked(c.c, "waits for %s", what)
	}
	c.r.mu.Unlock()
	c.r.notify()
}

// Wake says that the event a waiting client waits for is on its way: the
// scheduler waits for the client's next operation again. The store calls
// it before it ends the step that causes the event, so that no step runs
// between the cause and the client's answer to it.
func (c *Client) Wake() {
	c.r.mu.Lock()
	if c.c.waiting {
		c.c.waiting = false
		c.c.changed = time.Now()
	}
	c.r.mu.Unlock()
	c.r.notify()
}

// Fail ends the run with err: the store cannot go on.
func (c *Client) Fail(err error) { c.r.fail(err) }

// Send submits one operation of the client on node (1-based) to the
// scheduler, shown as label with args, and waits for its grant. A node
// the run took down, or a client cut off from it, refuses the operation
// before it is sent: Step then returns an error that wraps the
// unreachable node, the step already recorded. Otherwise the caller sends
// the operation and calls Done with its answer.
func (c *Client) Send(ctx context.Context, node int, label string, args []any) (*Sent, error) {
	return c.SendTouching(ctx, node, label, args, nil)
}

// SendTouching is Send of an operation that reads and writes what t says
// (nil: everything), which the step's event keeps (Event.Touch).
func (c *Client) SendTouching(ctx context.Context, node int, label string, args []any, t *Touch) (*Sent, error) {
	r := c.r
	own := &owner{}
	q, err := r.submitTouching(ctx, c.c, own, node, CommandText(label, args), "", t)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	down := r.down[node-1] || c.c.isolated
	r.mu.Unlock()
	if down {
		err := fmt.Errorf("%w: n%d", errUnreachable, node)
		r.reply(q, nil, err, false)
		r.idle(c.c, own)
		return nil, err
	}
	return &Sent{c: c, q: q, own: own, watch: r.watchRelease(c.c, node)}, nil
}

// Conn is one connection of a client, for a store whose operations on a
// connection share its state: its operations' steps are the connection's,
// which stays busy from an operation's grant until its next operation or
// Close (a client's library reads the answer and goes on, on the same
// connection, before the scheduler takes it for settled), and a
// transaction open on it (Transaction) has the explorer run its
// operations whole, no other client's step between them, as a server
// that queues a transaction's commands runs them.
type Conn struct {
	c   *Client
	own owner
}

// Conn opens a connection of the client.
func (c *Client) Conn() *Conn { return &Conn{c: c} }

// SendTouching submits one operation on the connection to node (1-based)
// to the scheduler, shown as text, touching what t says (nil:
// everything), and waits for its grant. A node the run took down, or a
// client cut off from it, refuses the operation before it is sent: the
// step is recorded, and the error wraps ErrUnreachable. Otherwise the
// caller sends the operation and calls Reply with its answer.
func (k *Conn) SendTouching(ctx context.Context, node int, text []string, t *Touch) (*Sent, error) {
	r, c := k.c.r, k.c.c
	q, err := r.submitTouching(ctx, c, &k.own, node, text, "", t)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	down := r.down[node-1] || c.isolated
	r.mu.Unlock()
	if down {
		err := fmt.Errorf("%w: n%d", errUnreachable, node)
		r.reply(q, nil, err, false)
		return nil, err
	}
	return &Sent{c: k.c, q: q, own: &k.own, watch: r.watchRelease(c, node)}, nil
}

// Transaction reports whether a transaction is open on the connection.
func (k *Conn) Transaction() bool {
	k.c.r.mu.Lock()
	defer k.c.r.mu.Unlock()
	return k.own.multi
}

// SetTransaction says whether a transaction is open on the connection:
// while one is, the explorer runs the connection's next operation before
// any other step.
func (k *Conn) SetTransaction(open bool) {
	k.c.r.mu.Lock()
	k.own.multi = open
	k.c.r.mu.Unlock()
}

// Continue records what the connection sent to complete its last step
// (the EVAL a client's library sends after a NOSCRIPT answer belongs to
// the EVALSHA's step): extra as the step's Extra, and its answer, v or
// err, as the step's reply. A multi-node client's step ends with it.
func (k *Conn) Continue(extra []string, v any, err error) {
	r, c := k.c.r, k.c.c
	r.mu.Lock()
	if e := r.eventLocked(c.lastEvent); e != nil {
		e.Extra = extra
		e.Reply = fmtReply(v, err)
	}
	r.mu.Unlock()
	if r.spec.multi {
		r.idle(c, &k.own)
	}
}

// Close closes the connection: a transaction open on it ends, and the
// client is no longer busy on it.
func (k *Conn) Close() {
	r := k.c.r
	r.mu.Lock()
	k.own.multi = false
	r.mu.Unlock()
	r.idle(k.c.c, &k.own)
}

// Sent is a granted operation of a client: one step of the schedule.
type Sent struct {
	c     *Client
	q     *request
	own   *owner
	watch *releaseWatch
}

// LoseReply reports whether the operation's reply is to be lost
// (lose(cN)): the store sends it, lets the server answer, then drops the
// connection the answer would come on, so that the client's library sees
// the connection drop with the operation done on the server; Done records
// what the server answered. It is true for one operation per lose step.
func (s *Sent) LoseReply() bool { return s.c.r.takeLost(s.c.c, s.q) }

// ErrLostReply is what a store's client reads where a lost reply was
// (LoseReply): the end of its connection.
var ErrLostReply = fmt.Errorf("%w: the connection dropped before the reply came", io.ErrUnexpectedEOF)

// Reply records the answer of an operation sent on a Conn (v, shown as
// the step's reply, or err) and judges the step; the connection stays
// busy until its next operation or Close, but a multi-node client's step
// ends here. more says the step goes on (Conn.Continue completes it).
func (s *Sent) Reply(v any, err error, more bool) {
	s.c.r.reply(s.q, v, err, more)
	s.watch.judge(s.q)
}

// Note adds a note to the step's event.
func (s *Sent) Note(note string) {
	r := s.c.r
	r.mu.Lock()
	if e := r.eventLocked(s.q.event); e != nil {
		e.Notes = append(e.Notes, note)
	}
	r.mu.Unlock()
}

// Done records the operation's answer (v, shown as the step's reply, or
// err) and ends the step.
func (s *Sent) Done(v any, err error) {
	r := s.c.r
	r.reply(s.q, v, err, false)
	s.watch.judge(s.q)
	r.idle(s.c.c, s.own)
}
