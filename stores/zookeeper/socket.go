// A client's socket to a server: each request its connection writes is a
// step of the client's, granted before it is sent, and each answer read
// ends its step with what the answer says.

package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/locklab/locklab/harness"
)

// socket is one connection of a client to a server.
type socket struct {
	net.Conn
	cl *zkClient

	wmu sync.Mutex
	// wrote: the connection's first packet (its handshake) went out.
	wrote bool

	mu sync.Mutex
	// pending are the granted requests that await their answer, by xid;
	// read is the part of the answers read that makes no whole frame
	// yet; answered: the handshake's answer was read.
	pending  map[int32]*pendingReq
	read     []byte
	answered bool
	// session is the session the handshake's answer gave (0: none yet,
	// or expired).
	session int64
	// lose is the xid of the request whose answer is lost (lose(cN)), 0
	// for none, and lost says it was; pass is what the connection has
	// yet to read of the whole frames read.
	lose int32
	pass []byte
	lost bool
}

// pendingReq is a granted request.
type pendingReq struct {
	req  request
	sent *harness.Sent
}

// Write sends the connection's packets: the handshake, heartbeats and
// the re-registration of watches after a reconnection (setWatches) as
// they come, and each request once the
// scheduler grants it. A request the scheduler refuses (its node is down,
// its client cut off) is not sent: the connection fails it with the
// scheduler's error and closes the socket, as a cut network would.
func (s *socket) Write(b []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !s.wrote || len(b) < 12 {
		s.wrote = true
		return s.Conn.Write(b)
	}
	q, err := readRequest(b[4:])
	if err != nil || q.xid < 0 || q.op == opPing || q.op == opSetWatches {
		return s.Conn.Write(b)
	}
	c := s.cl.step()
	if c == nil {
		return s.Conn.Write(b) // no run: its closing
	}
	s.cl.mu.Lock()
	s.cl.sending++
	s.cl.mu.Unlock()
	sent, err := c.SendTouching(context.Background(), 1, s.cl.s.label(c, q), nil, s.cl.s.stable(touches(q)))
	s.cl.mu.Lock()
	s.cl.sending--
	s.cl.mu.Unlock()
	if err != nil {
		// The connection fails the request with err, then closes the
		// socket; closing it here would race its own failure of every
		// request under way.
		return 0, err
	}
	s.mu.Lock()
	s.pending[q.xid] = &pendingReq{req: q, sent: sent}
	if sent.LoseReply() {
		s.lose = q.xid
	}
	s.mu.Unlock()
	n, err := s.Conn.Write(b)
	if err != nil {
		s.answer(q.xid, nil, err)
	}
	return n, err
}

// handshakeTimeout bounds the wait for the answer to a connection's
// handshake. A server sometimes leaves unanswered the handshake of a
// session the store has just closed from another connection (an expiry on
// the run's clock): the connection then gives up and dials again, rather
// than wait for the tenfold read timeout go-zookeeper allows a handshake.
const handshakeTimeout = 2 * time.Second

// SetReadDeadline sets the socket's read deadline: no later than
// handshakeTimeout from now while the handshake is unanswered.
func (s *socket) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	answered := s.answered
	s.mu.Unlock()
	if limit := time.Now().Add(handshakeTimeout); !answered && (t.IsZero() || t.After(limit)) {
		t = limit
	}
	return s.Conn.SetReadDeadline(t)
}

// Read reads the server's answers, and ends the step of each request
// answered. The connection reads whole frames only, so that an answer to
// lose (lose(cN)) is held back whole: its step ends with what the server
// answered, the socket closes, and the connection reads
// harness.ErrLostReply where the answer was, as from a connection that
// dropped before it came (go-zookeeper then reconnects to the session).
func (s *socket) Read(b []byte) (int, error) {
	for {
		s.mu.Lock()
		if len(s.pass) > 0 {
			n := copy(b, s.pass)
			s.pass = s.pass[n:]
			s.mu.Unlock()
			return n, nil
		}
		lost := s.lost
		s.mu.Unlock()
		if lost {
			return 0, harness.ErrLostReply
		}
		var buf [4096]byte
		n, err := s.Conn.Read(buf[:])
		if n > 0 {
			s.frames(buf[:n])
		}
		if err != nil {
			s.mu.Lock()
			more := len(s.pass) > 0 || s.lost
			s.mu.Unlock()
			if more {
				continue
			}
			s.failPending(err)
			return 0, err
		}
	}
}

// Close closes the socket; the requests still unanswered fail.
func (s *socket) Close() error {
	err := s.Conn.Close()
	s.failPending(net.ErrClosed)
	return err
}

// frames takes in bytes the server sent, and reads every whole frame.
func (s *socket) frames(b []byte) {
	s.mu.Lock()
	s.read = append(s.read, b...)
	var frames [][]byte
	for len(s.read) >= 4 {
		n := int(binary.BigEndian.Uint32(s.read))
		if len(s.read) < 4+n {
			break
		}
		frames = append(frames, s.read[4:4+n])
		s.read = s.read[4+n:]
	}
	first := !s.answered && len(frames) > 0
	s.answered = s.answered || len(frames) > 0
	s.mu.Unlock()
	for i, f := range frames {
		s.mu.Lock()
		if s.lost {
			s.mu.Unlock()
			return // what came after a lost answer is lost with it
		}
		if len(f) >= 4 && s.lose != 0 && int32(binary.BigEndian.Uint32(f)) == s.lose {
			s.lose, s.lost = 0, true
			s.mu.Unlock()
			s.answerFrame(f, true)
			s.Conn.Close()
			return
		}
		s.pass = binary.BigEndian.AppendUint32(s.pass, uint32(len(f)))
		s.pass = append(s.pass, f...)
		s.mu.Unlock()
		if i == 0 && first {
			if sess, err := readConnectResponse(f); err == nil {
				s.mu.Lock()
				s.session = sess.id
				s.mu.Unlock()
				s.cl.mu.Lock()
				s.cl.sess = sess
				s.cl.changed.Broadcast()
				s.cl.mu.Unlock()
			}
			continue
		}
		if len(f) < 4 {
			continue
		}
		s.answerFrame(f, false)
	}
}

// answerFrame ends the step of the request frame f answers; lost says
// the client never reads it.
func (s *socket) answerFrame(f []byte, lost bool) {
	xid := int32(binary.BigEndian.Uint32(f))
	s.mu.Lock()
	p := s.pending[xid]
	s.mu.Unlock()
	if p == nil {
		return // a heartbeat's answer, or a watch's event
	}
	a, err := readReply(f, p.req.op)
	if err != nil {
		s.answer(xid, nil, err)
		return
	}
	if a.err != 0 {
		s.answer(xid, nil, zkError(a.err))
		return
	}
	s.cl.answered(p.req, a, lost)
	s.answer(xid, s.cl.s.replyLabel(p.req, a), nil)
}

// answer ends the step of request xid with v or err.
func (s *socket) answer(xid int32, v any, err error) {
	s.mu.Lock()
	p := s.pending[xid]
	delete(s.pending, xid)
	s.mu.Unlock()
	if p != nil {
		p.sent.Done(v, err)
	}
}

// failPending ends the steps of the requests still unanswered with err.
func (s *socket) failPending(err error) {
	if errors.Is(err, io.EOF) {
		err = errors.New("connection closed")
	}
	s.mu.Lock()
	var xids []int32
	for xid := range s.pending {
		xids = append(xids, xid)
	}
	s.mu.Unlock()
	for _, xid := range xids {
		s.answer(xid, nil, err)
	}
}

// readFrame reads one frame from r.
func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err := io.ReadFull(r, b)
	return b, err
}

// sessionID is the session the socket's handshake was answered with.
func (s *socket) sessionID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}
