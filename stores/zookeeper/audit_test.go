package zookeeper

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
)

// The audit tells the sessions apart by their ids: the store's own
// connection, open at the check, is not counted; a connection the store
// did not open is, on the server it is on, with its session and its last
// request.
func TestAuditTellsSessionsApart(t *testing.T) {
	n := startStressEnsemble(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := newStore(n)
	require.NoError(t, err)
	defer s.Close(ctx)
	_, _, err = s.admin.Exists("/") // answered once the handshake is
	require.NoError(t, err)
	assert.True(t, n.sessions.has(s.admin.SessionID()), "the store's session %#x is not noted", s.admin.SessionID())

	check, err := startAudit(ctx, []harness.Node{n})
	require.NoError(t, err)
	require.NoError(t, check(ctx))

	other, _, err := zk.Connect(n.Ensemble.Addrs(), 10*time.Second, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	require.NoError(t, err)
	defer other.Close()
	_, _, err = other.Exists("/")
	require.NoError(t, err)
	err = check(ctx)
	require.Error(t, err)
	assert.Regexp(t, `^n1 zk\d \(127\.0\.0\.1:\d+\) holds 1 session\(s\) the harness did not open: 127\.0\.0\.1:\d+ `+
		fmt.Sprintf("sid=%#x lop=EXIS$", other.SessionID()), err.Error())
}

// strangers reads cons's lines, leaving out the connections without a
// session and those of the sessions known.
func TestConsStrangers(t *testing.T) {
	cons := " /127.0.0.1:41234[1](queued=0,recved=3,sent=3,sid=0x1000a2b3c4d0000,lop=EXIS,est=1764406000000,to=30000,lcxid=0x1,lzxid=0x0,lresp=1764406000001,llat=0,minlat=0,avglat=0,maxlat=0)\n" +
		" /127.0.0.1:41240[1](queued=0,recved=9,sent=9,sid=0x1000a2b3c4d0001,lop=PING,est=1764406000000,to=60000,lcxid=0x5,lzxid=0x0,lresp=1764406000001,llat=0,minlat=0,avglat=0,maxlat=0)\n" +
		" /127.0.0.1:41250[0](queued=0,recved=1,sent=0)\n\n"
	ours := func(id int64) bool { return id == 0x1000a2b3c4d0001 }
	assert.Equal(t, []string{"127.0.0.1:41234 sid=0x1000a2b3c4d0000 lop=EXIS"}, strangers(cons, ours))
}
