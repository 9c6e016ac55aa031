package zookeeper

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
)

// bench --stores gives every ZooKeeper locker a session of its own, as
// separate processes have, and none from Open.
func TestBenchContendersHaveSessions(t *testing.T) {
	n := NewNode("n1", zktest.Shared(t))
	cfg, server, closeBench, err := bench.Open(context.Background(), n, 2)
	require.NoError(t, err)
	defer closeBench()
	assert.Nil(t, cfg.Store, "no connection shared by the lockers")
	assert.Contains(t, server, "ZooKeeper")
	seen := map[int64]bool{}
	for range 3 {
		cfg, closeC, err := bench.Contender(context.Background(), n, nil)
		require.NoError(t, err)
		defer closeC()
		id := cfg.Store.(*zk.Conn).SessionID()
		assert.NotZero(t, id, "the session is open before the first cycle")
		assert.False(t, seen[id], "session %#x given twice", id)
		seen[id] = true
	}
}

// A contender's connection counts the requests its client sends: not the
// handshake, nor heartbeats, nor the close of its session.
func TestBenchContenderCountsRequests(t *testing.T) {
	n := NewNode("n1", zktest.Shared(t))
	var requests atomic.Int64
	cfg, closeC, err := bench.Contender(context.Background(), n, &requests)
	require.NoError(t, err)
	conn := cfg.Store.(*zk.Conn)
	assert.Zero(t, requests.Load(), "the handshake is no request")
	_, _, err = conn.Exists("/")
	require.NoError(t, err)
	_, err = conn.Create("/bench-counted", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	assert.Equal(t, int64(2), requests.Load())
	closeC()
	assert.Equal(t, int64(2), requests.Load(), "the close is no request")
}

// countingConn reads frames however the writes split them.
func TestCountingConnFrames(t *testing.T) {
	var requests atomic.Int64
	c := &countingConn{Conn: discard{}, requests: &requests}
	header := func(xid, op int32) []byte { return appendInt32(appendInt32(nil, xid), op) }
	var stream []byte
	stream = append(stream, connectRequest(session{timeout: 4000})...)
	stream = append(stream, frame(header(-2, opPing))...)
	stream = append(stream, frame(append(header(1, opCreate), make([]byte, 20)...))...)
	stream = append(stream, frame(header(2, opGetChildren2))...)
	stream = append(stream, frame(header(3, opClose))...)
	for len(stream) > 0 { // three bytes at a time
		k := min(3, len(stream))
		_, err := c.Write(stream[:k])
		require.NoError(t, err)
		stream = stream[k:]
	}
	assert.Equal(t, int64(2), requests.Load())
}

// discard is a connection that takes every write.
type discard struct{ net.Conn }

func (discard) Write(b []byte) (int, error) { return len(b), nil }
