// Package respconn is the connection a client adapter's NewClient gives
// its Redis client in place of a socket: a net.Conn that reads the
// commands the client writes (RESP arrays of bulk strings), sends each
// through a connection of a locklab.ConnSource, and gives the replies back
// in RESP2. The client adapters (adapters/*) build their clients on it,
// so that a lock written on such a client runs on locklab's connection
// sources, the race harness's among them, with each command one step.
package respconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	redigo "github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
)

// Options says how a Conn behaves where its clients differ.
type Options struct {
	// Name names the constructor in errors ("goredis.NewClient").
	Name string
	// Block makes a Read with no reply queued wait for one (or for the
	// connection's end), for a client that reads in a goroutine of its
	// own, as rueidis does. Without it such a Read fails: a client that
	// reads only after writing a command finds its reply queued.
	Block bool
	// LocalPing answers a PING without argument outside MULTI itself,
	// for a client that sends PINGs of its own (rueidis, to flush a
	// connection it closes or cleans): they are not the lock's commands.
	LocalPing bool
}

// New returns a connection whose commands go through src.
//
// Every whole command a Write holds is sent, in order, before Write
// returns, each on a connection of src (each its own step under the
// harness), and its reply is queued for Read. Every command runs on a
// connection taken from src for it and given back once it has answered,
// so that between two commands the client holds none, except that
// MULTI … EXEC and WATCH run on one connection of src, taken at MULTI (or
// WATCH) and given back after EXEC, DISCARD or UNWATCH, and so does the
// EVAL a client sends after an EVALSHA answered NOSCRIPT.
//
// Some commands are answered by the connection itself, without reaching
// src: HELLO is refused as an unknown command, so that the client speaks
// RESP2, the protocol src's connections speak; DISCARD outside MULTI is
// answered the error the server would give; UNSUBSCRIBE, PUNSUBSCRIBE
// and SUNSUBSCRIBE, which a client sends to clean a connection it gets
// back, are answered as the server answers them on a connection that
// subscribed to nothing (pub/sub does not go through a Conn); with
// Options.LocalPing, so is a PING without argument outside MULTI.
//
// An error of src's connection that is not the server's answer (the
// connection dropped, or the harness lost the reply) ends the Conn: Read
// returns the replies queued before it, then the error, as a socket's,
// and the client drops the connection. Close gives back the connection of
// src the Conn holds.
func New(src locklab.ConnSource, opt Options) net.Conn {
	c := &conn{src: src, opt: opt}
	c.ready = sync.NewCond(&c.mu)
	return c
}

type conn struct {
	src locklab.ConnSource
	opt Options

	// wmu orders Writes: a command's reply is queued before the next
	// command is parsed.
	wmu sync.Mutex

	mu    sync.Mutex
	ready *sync.Cond // signalled when out, err or closed changes
	// in is what the client wrote that is not yet a whole command.
	in []byte
	// out holds the replies the client has not read yet; after them, err
	// (the connection dropped), if set, is what Read returns.
	out    bytes.Buffer
	err    error
	closed bool
	// cur is the connection of src a transaction, a watch or a script
	// retry holds (nil: none), busy while a command runs on it.
	cur                 redigo.Conn
	busy                bool
	multi, watch, retry bool
}

var _ net.Conn = (*conn)(nil)

// Write takes what the client sends: every whole command in it is sent,
// in order, before Write returns, and its reply is queued for Read.
func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	if c.err != nil {
		return 0, c.err
	}
	c.in = append(c.in, p...)
	for c.err == nil {
		args, n, err := parseCommand(c.in)
		if err != nil {
			c.fail(fmt.Errorf("locklab %s: %w", c.opt.Name, err))
			return 0, c.err
		}
		if n == 0 {
			break
		}
		c.in = c.in[n:]
		c.do(args)
	}
	if len(c.in) == 0 {
		c.in = nil
	}
	return len(p), nil
}

// fail ends the connection with err. c.mu is held.
func (c *conn) fail(err error) {
	c.err = err
	c.ready.Broadcast()
}

// reply queues v for Read. c.mu is held.
func (c *conn) reply(v any) {
	writeReply(&c.out, v)
	c.ready.Broadcast()
}

// local answers the commands the connection answers itself, and reports
// whether args was one.
func (c *conn) local(name string) bool {
	switch name {
	case "HELLO":
		// Refused, in the words a server without HELLO uses, so that
		// the client speaks RESP2, the protocol src's connections
		// speak; src never sees the handshake.
		c.reply(redigo.Error("ERR unknown command 'HELLO': the connection speaks RESP2 (locklab " + c.opt.Name + ")"))
	case "DISCARD":
		if c.multi {
			return false
		}
		c.reply(redigo.Error("ERR DISCARD without MULTI"))
	case "PING":
		if !c.opt.LocalPing || c.multi {
			return false
		}
		c.reply("PONG")
	case "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE":
		c.reply([]any{[]byte(strings.ToLower(name)), nil, int64(0)})
	default:
		return false
	}
	return true
}

// do sends one command and queues its reply, or records that the
// connection dropped. c.mu is held, but not while the command runs.
func (c *conn) do(args []string) {
	name := strings.ToUpper(args[0])
	if (len(args) == 1 || name == "HELLO") && c.local(name) {
		return
	}
	conn := c.cur
	if conn == nil {
		var err error
		if conn, err = c.src.GetContext(context.Background()); err != nil {
			c.fail(err)
			return
		}
	}
	c.cur, c.busy = conn, true
	cmdArgs := make([]any, len(args)-1)
	for i, a := range args[1:] {
		cmdArgs[i] = a
	}
	c.mu.Unlock()
	v, err := conn.Do(name, cmdArgs...)
	c.mu.Lock()
	c.busy = false
	var re redigo.Error
	if err != nil && !errors.As(err, &re) {
		// Not the server's answer: the connection dropped, or src's
		// connection is done. The client reads the replies before, then
		// this error, as its socket's, and drops the connection; it
		// retries the command when the error is one it retries (an
		// unexpected EOF, as the harness's lost reply is, or a timeout).
		c.fail(err)
		c.multi, c.watch, c.retry = false, false, false
	} else {
		if err != nil {
			v = re
		}
		switch name {
		case "MULTI":
			c.multi = c.multi || err == nil
		case "WATCH":
			c.watch = c.watch || err == nil
		case "EXEC", "DISCARD", "UNWATCH":
			c.multi, c.watch = false, false
		}
		c.retry = name == "EVALSHA" && err != nil && strings.HasPrefix(string(re), "NOSCRIPT")
		c.reply(v)
	}
	if c.closed || c.err != nil || !(c.multi || c.watch || c.retry) {
		c.cur = nil
		conn.Close()
	}
}

// Read returns the replies queued, then the error that ended the
// connection, if one did.
func (c *conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.out.Len() > 0 {
			return c.out.Read(p)
		}
		if c.err != nil {
			return 0, c.err
		}
		if c.closed {
			return 0, net.ErrClosed
		}
		if !c.opt.Block {
			// The client reads only after writing a command, whose
			// reply Write queued: nothing to wait for.
			return 0, io.ErrUnexpectedEOF
		}
		c.ready.Wait()
	}
}

// Close gives back the connection of src it holds, if any, and ends a
// Read that waits.
func (c *conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.ready.Broadcast()
	if c.cur != nil && !c.busy {
		c.cur.Close()
		c.cur = nil
	}
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return addr{} }
func (c *conn) RemoteAddr() net.Addr { return addr{} }

// The deadlines are src's connections': each command is bounded there,
// and the harness holds one back for as long as the schedule says.
func (c *conn) SetDeadline(time.Time) error      { return nil }
func (c *conn) SetReadDeadline(time.Time) error  { return nil }
func (c *conn) SetWriteDeadline(time.Time) error { return nil }

// addr is the address of both ends of a conn.
type addr struct{}

func (addr) Network() string { return "locklab" }
func (addr) String() string  { return "locklab" }

// errProtocol is the error of a write that is not a command as clients
// send them.
var errProtocol = errors.New("not a RESP array of bulk strings")

// parseCommand parses the first command in b, a RESP array of bulk
// strings. It returns n == 0 when b holds less than a whole command.
func parseCommand(b []byte) (args []string, n int, err error) {
	line := func(from int) (string, int, bool) {
		i := bytes.Index(b[from:], []byte("\r\n"))
		if i < 0 {
			return "", 0, false
		}
		return string(b[from : from+i]), from + i + 2, true
	}
	head, pos, ok := line(0)
	if !ok {
		return nil, 0, nil
	}
	if len(head) < 2 || head[0] != '*' {
		return nil, 0, errProtocol
	}
	count, err := strconv.Atoi(head[1:])
	if err != nil || count < 1 {
		return nil, 0, errProtocol
	}
	args = make([]string, 0, count)
	for range count {
		h, next, ok := line(pos)
		if !ok {
			return nil, 0, nil
		}
		if len(h) < 2 || h[0] != '$' {
			return nil, 0, errProtocol
		}
		size, err := strconv.Atoi(h[1:])
		if err != nil || size < 0 {
			return nil, 0, errProtocol
		}
		if len(b) < next+size+2 {
			return nil, 0, nil
		}
		if string(b[next+size:next+size+2]) != "\r\n" {
			return nil, 0, errProtocol
		}
		args = append(args, string(b[next:next+size]))
		pos = next + size + 2
	}
	return args, pos, nil
}

// writeReply writes v, a reply as redigo returns it, in RESP2.
func writeReply(w *bytes.Buffer, v any) {
	bw := bufio.NewWriter(w)
	writeValue(bw, v)
	bw.Flush()
}

func writeValue(w *bufio.Writer, v any) {
	switch v := v.(type) {
	case nil:
		w.WriteString("$-1\r\n")
	case redigo.Error:
		w.WriteString("-" + oneLine(string(v)) + "\r\n")
	case string:
		w.WriteString("+" + oneLine(v) + "\r\n")
	case int64:
		w.WriteString(":" + strconv.FormatInt(v, 10) + "\r\n")
	case []byte:
		w.WriteString("$" + strconv.Itoa(len(v)) + "\r\n")
		w.Write(v)
		w.WriteString("\r\n")
	case []any:
		w.WriteString("*" + strconv.Itoa(len(v)) + "\r\n")
		for _, e := range v {
			writeValue(w, e)
		}
	default:
		// Not a RESP2 reply (src speaks another protocol): as text.
		s := fmt.Sprint(v)
		w.WriteString("$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n")
	}
}

// oneLine keeps a simple string or an error on its line.
func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
