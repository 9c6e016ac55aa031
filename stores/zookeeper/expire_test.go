package zookeeper

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
)

// handshake opens a connection to addr with sess (id 0: a new session)
// and returns the session the server answers with (id 0: sess has
// expired).
func handshake(t *testing.T, addr string, sess session) session {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	sess.timeout = int32(sessionTimeout / time.Millisecond)
	if _, err := nc.Write(connectRequest(sess)); err != nil {
		t.Fatal(err)
	}
	f, err := readFrame(nc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readConnectResponse(f)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestExpireOutlastsAnElection: ending a session waits while no server
// serves a client, as while the ensemble elects a leader, and ends it
// once a quorum is back. Two of the three servers are killed, so that the
// third serves nobody, before the end is asked for; they are started
// again while the store keeps trying.
func TestExpireOutlastsAnElection(t *testing.T) {
	e := zktest.Start(t, zkproc.Options{Config: serverConfig})
	s := &zkStore{node: NewNode("n1", e)}
	sess := handshake(t, e.Addrs()[0], session{})
	if sess.id == 0 {
		t.Fatal("the server opened no session")
	}
	down := e.Servers()[1:]
	for _, sv := range down {
		sv.Kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, addr := range e.Addrs() {
		if err := closeSession(ctx, addr, sess); err == nil {
			t.Fatalf("%s ended the session without a quorum", addr)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.expire(ctx, sess) }()
	for _, sv := range down {
		go sv.Restart(ctx)
	}
	if err := <-done; err != nil {
		t.Fatalf("the session was not ended once the quorum was back: %v", err)
	}
	if err := e.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if got := handshake(t, e.Addrs()[0], sess); got.id != 0 {
		t.Fatalf("session %#x still open after expire", got.id)
	}
}

// TestNewSessionEndsWithItsContext: the wait for a client's next session
// after its session was ended ends with the run's context (an interrupted
// matrix does not wait out the timeout), and reports neither a new
// session nor a resumed one; a handshake's answer still ends it at once.
func TestNewSessionEndsWithItsContext(t *testing.T) {
	cl := &zkClient{}
	cl.changed = sync.NewCond(&cl.mu)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan [2]bool)
	go func() {
		ok, resumed := cl.newSession(ctx, 7, time.Hour)
		done <- [2]bool{ok, resumed}
	}()
	cancel()
	if got := <-done; got != [2]bool{} {
		t.Fatalf("newSession after its context ended: ok, resumed = %v, want false, false", got)
	}

	go func() {
		ok, resumed := cl.newSession(context.Background(), 7, time.Hour)
		done <- [2]bool{ok, resumed}
	}()
	cl.mu.Lock()
	cl.sess = session{id: 8}
	cl.changed.Broadcast()
	cl.mu.Unlock()
	if got := <-done; got != [2]bool{true, false} {
		t.Fatalf("newSession after a new session's handshake: ok, resumed = %v, want true, false", got)
	}
}
