// ZooKeeper's wire format, as far as the store reads it: the frames of a
// client's connection (a 4-byte length, then a packet in jute's
// big-endian encoding), the headers of requests and replies, and the
// bodies of the requests the locks send and of their answers, for the
// timeline's labels.

package zookeeper

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The opcodes of the requests the store shows as steps (ZooDefs.OpCode).
const (
	opNotify       = 0
	opCreate       = 1
	opDelete       = 2
	opExists       = 3
	opGetData      = 4
	opSetData      = 5
	opGetChildren  = 8
	opSync         = 9
	opPing         = 11
	opGetChildren2 = 12
	opCheck        = 13
	opMulti        = 14
	opCreate2      = 15
	opSetWatches   = 101
	opClose        = -11
)

// The create flags (CreateMode).
const (
	flagEphemeral  = 1
	flagSequential = 2
)

// errorNames names the error codes a lock's requests meet (KeeperException.Code).
var errorNames = map[int32]string{
	-4:   "connection loss",
	-101: "no node",
	-102: "no auth",
	-103: "bad version",
	-110: "node exists",
	-111: "not empty",
	-112: "session expired",
	-118: "session moved",
}

// zkError is a reply's error code, as a timeline shows it.
type zkError int32

func (e zkError) Error() string {
	if n, ok := errorNames[int32(e)]; ok {
		return n
	}
	return fmt.Sprintf("error %d", int32(e))
}

var errShort = errors.New("zookeeper: short packet")

// reader reads jute's encoding from a packet.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errShort
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *reader) int64() int64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (r *reader) bool() bool {
	b := r.take(1)
	return b != nil && b[0] != 0
}

// buffer reads a buffer or a string: a length (-1 for null), then bytes.
func (r *reader) buffer() []byte {
	n := r.int32()
	if n <= 0 {
		return nil
	}
	return r.take(int(n))
}

func (r *reader) string() string { return string(r.buffer()) }

// strings reads a vector of strings.
func (r *reader) strings() []string {
	n := r.int32()
	var out []string
	for i := int32(0); i < n && r.err == nil; i++ {
		out = append(out, r.string())
	}
	return out
}

// stat reads a Stat, of which the store keeps the czxid and the session
// that owns an ephemeral node.
func (r *reader) stat() (czxid, owner int64) {
	czxid = r.int64()
	r.take(8 + 8 + 8 + 4 + 4 + 4) // mzxid, ctime, mtime, version, cversion, aversion
	owner = r.int64()
	r.take(4 + 4 + 8) // dataLength, numChildren, pzxid
	return czxid, owner
}

// request is a request's header and what its body says, for its label.
type request struct {
	xid, op int32
	path    string
	flags   int32 // create
	watch   bool  // exists, getData, getChildren
	// ops are a multi's check and setData ops (the guarded write's), each
	// with its path; another op ends the list.
	ops []request
	// version is a check's or a setData's expected version.
	version int32
}

// readRequest reads a request packet (without its length).
func readRequest(p []byte) (request, error) {
	r := &reader{b: p}
	q := request{xid: r.int32(), op: r.int32()}
	switch q.op {
	case opCreate, opCreate2:
		q.path = r.string()
		r.buffer() // data
		for n := r.int32(); n > 0 && r.err == nil; n-- {
			r.int32()  // perms
			r.string() // scheme
			r.string() // id
		}
		q.flags = r.int32()
	case opDelete, opSetData, opCheck, opSync:
		q.path = r.string()
	case opExists, opGetData, opGetChildren, opGetChildren2:
		q.path = r.string()
		q.watch = r.bool()
	case opMulti:
		q.ops = readMultiOps(r)
	}
	return q, r.err
}

// readMultiOps reads a multi request's ops, up to its done header: the
// check and setData ops it can tell; it stops at any other.
func readMultiOps(r *reader) []request {
	var ops []request
	for r.err == nil {
		op, done := r.int32(), r.bool()
		r.int32() // the header's error
		if done || r.err != nil {
			break
		}
		switch op {
		case opCheck:
			ops = append(ops, request{op: op, path: r.string(), version: r.int32()})
		case opSetData:
			q := request{op: op, path: r.string()}
			r.buffer() // data
			q.version = r.int32()
			ops = append(ops, q)
		default:
			return append(ops, request{op: op})
		}
	}
	return ops
}

// multiError reads a multi reply's results: the first error one of its
// ops met, 0 when they all succeeded.
func multiError(r *reader) int32 {
	for r.err == nil {
		op, done, _ := r.int32(), r.bool(), r.int32()
		if done {
			return 0
		}
		if op == -1 { // an ErrorResult: the op's error code
			if code := r.int32(); code != 0 {
				return code
			}
			continue
		}
		return 0 // the ops succeeded: a failed multi answers with errors only
	}
	return 0
}

// reply is a reply's header and what its body says, for its label.
type reply struct {
	xid      int32
	zxid     int64
	err      int32
	path     string   // create
	children []string // getChildren
	czxid    int64    // exists, getData, getChildren2 (the node's), create2
	found    bool     // a Stat was read
}

// readReply reads a reply packet to a request of op (without its
// length).
func readReply(p []byte, op int32) (reply, error) {
	r := &reader{b: p}
	a := reply{xid: r.int32(), zxid: r.int64(), err: r.int32()}
	if a.err != 0 {
		return a, r.err
	}
	if op == opMulti {
		// A multi that failed answers with no error in its header: its
		// ops' results say which failed.
		a.err = multiError(r)
		return a, r.err
	}
	switch op {
	case opCreate:
		a.path = r.string()
	case opCreate2:
		a.path = r.string()
		a.czxid, _ = r.stat()
		a.found = true
	case opExists, opSetData:
		a.czxid, _ = r.stat()
		a.found = true
	case opGetData:
		r.buffer()
		a.czxid, _ = r.stat()
		a.found = true
	case opGetChildren:
		a.children = r.strings()
	case opGetChildren2:
		a.children = r.strings()
	}
	return a, r.err
}

// session is what a connect response says of a session.
type session struct {
	id      int64
	passwd  []byte
	timeout int32
}

// readConnectResponse reads the answer to a connection's first packet.
func readConnectResponse(p []byte) (session, error) {
	r := &reader{b: p}
	r.int32() // protocol version
	s := session{timeout: r.int32(), id: r.int64()}
	s.passwd = append([]byte(nil), r.buffer()...)
	return s, r.err
}

// appendInt32 and the others below write jute's encoding.
func appendInt32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func appendInt64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }
func appendBuffer(b, v []byte) []byte      { return append(appendInt32(b, int32(len(v))), v...) }

// frame prefixes a packet with its length.
func frame(p []byte) []byte { return append(appendInt32(nil, int32(len(p))), p...) }

// connectRequest is the packet that opens a connection to session s (a
// new session when s.id is 0).
func connectRequest(s session) []byte {
	p := appendInt32(nil, 0) // protocol version
	p = appendInt64(p, 0)    // last zxid seen
	p = appendInt32(p, s.timeout)
	p = appendInt64(p, s.id)
	return frame(appendBuffer(p, s.passwd))
}

// closeRequest is the request that ends the connection's session.
func closeRequest(xid int32) []byte {
	return frame(appendInt32(appendInt32(nil, xid), opClose))
}
