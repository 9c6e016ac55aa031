package goredis

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
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locklab/locklab"
)

// NewClient returns a go-redis client whose every command goes through
// src, the direction opposite to New: a lock written on go-redis runs on
// locklab's connection sources, the race harness's among them, which a
// locklabtest factory receives in Config.Pool:
//
//	func(cfg locklab.Config) (locklab.Locker, error) {
//		return mylock.New(goredis.NewClient(cfg.Pool, nil)), nil
//	}
//
// There each command the lock sends is one step of the schedule, as a
// redigo command is. A pipeline's commands are sent one by one, each its
// own step; MULTI … EXEC and WATCH run on one connection of src, taken at
// MULTI (or WATCH) and given back after EXEC, DISCARD or UNWATCH, and so
// does the EVAL that go-redis's Script sends after an EVALSHA answered
// NOSCRIPT. Every other command runs on a connection taken from src for it
// and given back once it has answered, so that between two commands the
// lock holds none.
//
// The client's connections are not sockets: go-redis writes its commands
// to them, they send each through a connection of src with Do, and they
// give the replies back to go-redis in RESP2. The handshake go-redis makes
// on a new connection is answered there, without reaching src: HELLO is
// refused, so the client speaks RESP2, and the rest of it is turned off.
// opt (nil for go-redis's defaults) is copied, and what belongs to src's
// connections is set: Addr, Dialer and Protocol (2), no DB, credentials,
// TLS or client name (src's connections have theirs), no CLIENT SETINFO
// and no maintenance notifications; the read and write timeouts are src's,
// its connections' own. What the lock sees of go-redis stays: its command
// types and replies, redis.Nil, its retries (MaxRetries: an error of src's
// connection that is not the server's answer reaches go-redis as its
// socket's would, and go-redis sends the command again on a new
// connection when it retries that error, as it does an unexpected EOF,
// which is what the harness's lost reply is), its hooks and its pool.
// Pub/sub does not go through such a client. Closing the client gives
// back the connections it holds.
func NewClient(src locklab.ConnSource, opt *redis.Options) *redis.Client {
	var o redis.Options
	if opt != nil {
		o = *opt
	}
	o.Network, o.Addr = "tcp", "locklab"
	o.Dialer = func(context.Context, string, string) (net.Conn, error) {
		return &srcConn{src: src}, nil
	}
	o.Protocol = 2
	o.DB, o.Username, o.Password, o.CredentialsProvider = 0, "", "", nil
	o.CredentialsProviderContext, o.StreamingCredentialsProvider = nil, nil
	o.TLSConfig, o.ClientName, o.OnConnect = nil, "", nil
	o.DisableIdentity = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	// -2: go-redis sets no deadline on the connections (src's bound each
	// command, and the harness holds one back for as long as the schedule
	// says).
	o.ReadTimeout, o.WriteTimeout = -2, -2
	return redis.NewClient(&o)
}

// srcConn is a connection of a NewClient client: a net.Conn that reads
// the commands go-redis writes (RESP arrays of bulk strings), sends each
// through a connection of src, and holds the replies, in RESP2, for
// go-redis to read.
type srcConn struct {
	src locklab.ConnSource

	mu sync.Mutex
	// in is what go-redis wrote that is not yet a whole command.
	in []byte
	// out holds the replies go-redis has not read yet; after them, err
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

var _ net.Conn = (*srcConn)(nil)

// Write takes what go-redis sends: every whole command in it is sent, in
// order, before Write returns, and its reply is queued for Read.
func (c *srcConn) Write(p []byte) (int, error) {
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
			c.err = err
			return 0, err
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

// do sends one command and queues its reply, or records that the
// connection dropped. c.mu is held, but not while the command runs.
func (c *srcConn) do(args []string) {
	name := strings.ToUpper(args[0])
	if name == "HELLO" {
		// Refused here: the client speaks RESP2, the protocol src's
		// connections speak, and src never sees the handshake.
		writeReply(&c.out, redigo.Error("NOPROTO the connection speaks RESP2 (locklab goredis.NewClient)"))
		return
	}
	conn := c.cur
	if conn == nil {
		var err error
		if conn, err = c.src.GetContext(context.Background()); err != nil {
			c.err = err
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
		// connection is done. go-redis reads the replies before, then
		// this error, as its socket's, and drops the connection; it
		// retries the command when the error is one it retries (an
		// unexpected EOF, as the harness's lost reply is, or a timeout).
		c.err = err
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
		writeReply(&c.out, v)
	}
	if c.closed || c.err != nil || !(c.multi || c.watch || c.retry) {
		c.cur = nil
		conn.Close()
	}
}

// Read returns the replies queued, then the error that ended the
// connection, if one did.
func (c *srcConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out.Len() > 0 {
		return c.out.Read(p)
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.closed {
		return 0, net.ErrClosed
	}
	// go-redis reads only after writing a command, whose reply Write
	// queued: nothing to wait for.
	return 0, io.ErrUnexpectedEOF
}

// Close gives back the connection of src it holds, if any.
func (c *srcConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.cur != nil && !c.busy {
		c.cur.Close()
		c.cur = nil
	}
	return nil
}

func (c *srcConn) LocalAddr() net.Addr              { return srcAddr{} }
func (c *srcConn) RemoteAddr() net.Addr             { return srcAddr{} }
func (c *srcConn) SetDeadline(time.Time) error      { return nil }
func (c *srcConn) SetReadDeadline(time.Time) error  { return nil }
func (c *srcConn) SetWriteDeadline(time.Time) error { return nil }

// srcAddr is the address of both ends of a srcConn.
type srcAddr struct{}

func (srcAddr) Network() string { return "locklab" }
func (srcAddr) String() string  { return "locklab" }

// errProtocol is the error of a write that is not a command as go-redis
// sends them.
var errProtocol = errors.New("locklab goredis.NewClient: not a RESP array of bulk strings")

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
