package zklock_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ZooKeeper's opcodes, as a client sends them in a request's header.
const (
	opCreate       = 1
	opDelete       = 2
	opExists       = 3
	opGetData      = 4
	opGetChildren2 = 12
	opCloseSession = -11
)

// errCut is what a dial through a cut wire gets.
var errCut = errors.New("wire cut: no route to the ensemble")

// wire is the network between one test client (one *zk.Conn) and the
// ensemble, as its dialer (zk.WithDialer): it reads the frames each way to
// learn the session's id and password from the server's connect answers,
// counts the requests the client sends (pings aside) and the watch
// notifications it receives, loses the answer of a chosen request, holds
// a chosen request's connection after the request went out, and cuts the
// client off from every server, as a partition does, until healed.
type wire struct {
	mu       sync.Mutex
	sid      int64
	passwd   []byte
	timeout  time.Duration // the session timeout the server granted
	cut      bool
	frozen   bool          // the cut holds dials past their timeout (Freeze)
	healed   chan struct{} // closed by Heal
	conns    map[*wireConn]bool
	requests map[int32]int // by opcode
	events   int           // watch notifications received
	losses   []*loss
	stalls   []*stall
}

// stall is a request after which the connection goes dead for its
// client: the request reaches the server, and its answer comes back to
// the client, but the client's connection never writes again (the write
// of the request returns only once the connection is dropped). answered
// is closed once the client has taken the answer in: its next read of the
// connection begins (go-zookeeper's reader hands each answer to its
// request before it reads on).
type stall struct {
	op       int32
	answered chan struct{}
}

// loss is a request whose answer the wire loses: the after-th request
// (0: the first) of opcode op reaches the server, then the connection
// drops before its answer comes back. done is closed once it happened.
type loss struct {
	op    int32
	after int
	done  chan struct{}
}

func newWire() *wire {
	return &wire{conns: map[*wireConn]bool{}, requests: map[int32]int{}}
}

// dial is the client's zk.Dialer. Across a cut it hangs, as a dial whose
// packets vanish does, until Heal or its timeout.
func (w *wire) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	w.mu.Lock()
	cut, healed := w.cut, w.healed
	w.mu.Unlock()
	if cut {
		var expired <-chan time.Time
		if !w.frozen {
			expired = time.After(timeout)
		}
		select {
		case <-healed:
		case <-expired:
			return nil, errCut
		}
	}
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	wc := &wireConn{Conn: c, w: w, gone: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		c.Close()
		return nil, errCut
	}
	w.conns[wc] = true
	return wc, nil
}

// session is the id and password of the session the client has now, and
// the timeout the server granted it.
func (w *wire) session() (int64, []byte, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sid, append([]byte(nil), w.passwd...), w.timeout
}

// loseAnswer makes the wire lose the answer to the after-th next request
// of opcode op; the returned channel is closed once it did.
func (w *wire) loseAnswer(op int32, after int) <-chan struct{} {
	l := &loss{op: op, after: after, done: make(chan struct{})}
	w.mu.Lock()
	w.losses = append(w.losses, l)
	w.mu.Unlock()
	return l.done
}

// stallAfter makes the wire stall the client's connection after the next
// request of opcode op (stall); the returned channel is closed once the
// client took the request's answer in.
func (w *wire) stallAfter(op int32) <-chan struct{} {
	st := &stall{op: op, answered: make(chan struct{})}
	w.mu.Lock()
	w.stalls = append(w.stalls, st)
	w.mu.Unlock()
	return st.answered
}

// Cut drops every connection of the client and holds its dials until
// Heal: no request and no heartbeat reaches a server.
func (w *wire) Cut() { w.cut1(false) }

// Freeze is Cut as a stopped process (a long GC pause, a frozen VM) sees
// it: its dials wait for Heal whatever their timeout, since a process
// that does not run dials nothing, and, once it runs again, it finds its
// connection dead and dials a server that answers.
func (w *wire) Freeze() { w.cut1(true) }

func (w *wire) cut1(frozen bool) {
	w.mu.Lock()
	if !w.cut {
		w.healed = make(chan struct{})
	}
	w.cut, w.frozen = true, frozen
	conns := w.conns
	w.conns = map[*wireConn]bool{}
	w.mu.Unlock()
	for c := range conns {
		c.drop()
	}
}

// Heal lets the client dial again.
func (w *wire) Heal() {
	w.mu.Lock()
	if w.cut {
		close(w.healed)
	}
	w.cut = false
	w.mu.Unlock()
}

// counts are the requests by opcode, and the watch notifications, so far.
func (w *wire) counts() (map[int32]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int32]int, len(w.requests))
	for op, n := range w.requests {
		out[op] = n
	}
	return out, w.events
}

// sent counts a request of opcode op, and tells whether its answer is to
// be lost, and whether the connection stalls after it.
func (w *wire) sent(op int32) (*loss, *stall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.requests[op]++
	var st *stall
	for i, s := range w.stalls {
		if s.op == op {
			st = s
			w.stalls = append(w.stalls[:i], w.stalls[i+1:]...)
			break
		}
	}
	for i, l := range w.losses {
		if l.op != op {
			continue
		}
		if l.after > 0 {
			l.after--
			continue
		}
		w.losses = append(w.losses[:i], w.losses[i+1:]...)
		return l, st
	}
	return nil, st
}

// wireConn is one connection of the client to a server.
type wireConn struct {
	net.Conn
	w *wire
	// dead: the connection is dropped, and nothing more is read from it;
	// gone is closed then.
	dead atomic.Bool
	gone chan struct{}
	once sync.Once
	// connected: the connect request went out (writes), the connect
	// answer came in (reads).
	wrote, read bool
	acc         []byte // server bytes not parsed yet
	// lose are the requests, by xid, whose answers the connection loses.
	// stalled is the request after which the connection stalls, by xid,
	// and answered says its answer was read: the next read tells.
	mu       sync.Mutex
	lose     map[int32]*loss
	stalled  map[int32]*stall
	answered *stall
}

func (c *wireConn) drop() {
	c.dead.Store(true)
	c.once.Do(func() { close(c.gone) })
	c.Conn.Close()
}

// Write passes one frame of the client's on (go-zookeeper writes each
// frame whole), counting requests; a request whose answer is to be lost
// reaches the server, and the connection drops when its answer arrives,
// before the client reads it. The write of a request the connection
// stalls after returns only once the connection is dropped.
func (c *wireConn) Write(b []byte) (int, error) {
	if c.dead.Load() {
		return 0, net.ErrClosed
	}
	var st *stall
	if !c.wrote {
		c.wrote = true // the connect request
	} else if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[4:8])) != -2 { // xid -2: a ping
		xid := int32(binary.BigEndian.Uint32(b[4:8]))
		var l *loss
		l, st = c.w.sent(int32(binary.BigEndian.Uint32(b[8:12])))
		c.mu.Lock()
		if l != nil {
			if c.lose == nil {
				c.lose = map[int32]*loss{}
			}
			c.lose[xid] = l
		}
		if st != nil {
			if c.stalled == nil {
				c.stalled = map[int32]*stall{}
			}
			c.stalled[xid] = st
		}
		c.mu.Unlock()
	}
	n, err := c.Conn.Write(b)
	if st != nil && err == nil {
		<-c.gone
		return 0, net.ErrClosed
	}
	return n, err
}

// Read passes the server's bytes on, reading their frames; the bytes that
// bring a lost answer are not passed on: the connection drops instead.
func (c *wireConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	st := c.answered
	c.answered = nil
	c.mu.Unlock()
	if st != nil {
		close(st.answered)
	}
	if c.dead.Load() {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.Conn.Read(p)
	if c.dead.Load() {
		return 0, io.ErrUnexpectedEOF
	}
	if l := c.feed(p[:n]); l != nil {
		c.drop()
		close(l.done)
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// feed parses the server's frames: the connect answer first, then answers
// and notifications (xid -1). It returns the loss of an answer among
// them, if any.
func (c *wireConn) feed(b []byte) *loss {
	c.acc = append(c.acc, b...)
	for len(c.acc) >= 4 {
		size := int(binary.BigEndian.Uint32(c.acc[:4]))
		if len(c.acc) < 4+size {
			return nil
		}
		frame := c.acc[4 : 4+size]
		c.acc = c.acc[4+size:]
		c.w.mu.Lock()
		switch {
		case !c.read:
			c.read = true
			// protocolVersion, timeOut, sessionId, passwd (length first)
			if len(frame) >= 20 {
				if sid := int64(binary.BigEndian.Uint64(frame[8:16])); sid != 0 {
					plen := int(binary.BigEndian.Uint32(frame[16:20]))
					c.w.sid = sid
					c.w.timeout = time.Duration(binary.BigEndian.Uint32(frame[4:8])) * time.Millisecond
					c.w.passwd = append([]byte(nil), frame[20:20+plen]...)
				}
			}
		case len(frame) >= 4 && int32(binary.BigEndian.Uint32(frame[:4])) == -1:
			c.w.events++
		case len(frame) >= 4:
			xid := int32(binary.BigEndian.Uint32(frame[:4]))
			c.mu.Lock()
			l := c.lose[xid]
			if st := c.stalled[xid]; st != nil {
				delete(c.stalled, xid)
				c.answered = st
			}
			c.mu.Unlock()
			if l != nil {
				c.w.mu.Unlock()
				return l
			}
		}
		c.w.mu.Unlock()
	}
	return nil
}

// closeSession ends the session sid from a connection of its own to addr,
// as a second client that knows the session's password can: it attaches
// to the session, then closes it. The server deletes the session's
// ephemeral nodes before it answers.
func closeSession(t testing.TB, addr string, sid int64, passwd []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
	// passwd.
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 4000)
	req = binary.BigEndian.AppendUint64(req, uint64(sid))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	writeFrame(t, c, req)
	resp := readFrame(t, c)
	require.GreaterOrEqual(t, len(resp), 16)
	if binary.BigEndian.Uint64(resp[8:16]) == 0 {
		return // expired already
	}
	// closeSession: xid 1, type -11, no body; the answer's header is xid,
	// zxid, err.
	writeFrame(t, c, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), uint32(0xFFFFFFF5)))
	ans := readFrame(t, c)
	require.GreaterOrEqual(t, len(ans), 16)
	require.Zero(t, binary.BigEndian.Uint32(ans[12:16]), "closeSession answered with an error")
}

func writeFrame(t testing.TB, c net.Conn, body []byte) {
	t.Helper()
	_, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	require.NoError(t, err)
}

func readFrame(t testing.TB, c net.Conn) []byte {
	t.Helper()
	var size [4]byte
	_, err := io.ReadFull(c, size[:])
	require.NoError(t, err)
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, body)
	require.NoError(t, err)
	return body
}
