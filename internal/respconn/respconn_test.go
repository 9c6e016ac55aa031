package respconn_test

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/respconn"
	"github.com/locklab/locklab/internal/tooling/counting"
	"github.com/locklab/locklab/internal/tooling/redistest"
)

// A command split across Writes runs once it is whole; several in one
// Write run in order; the commands answered locally reach no server; a
// waiting Read ends when the connection closes.
func TestConn(t *testing.T) {
	srv := redistest.Start(t, 1)[0]
	src := &counting.Source{Src: srv.Pool}
	c := respconn.New(src, respconn.Options{Name: "test", Block: true, LocalPing: true})
	r := bufio.NewReader(c)
	write := func(s string) {
		t.Helper()
		if n, err := c.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	read := func(want string) {
		t.Helper()
		for _, w := range strings.SplitAfter(want, "\r\n") {
			if w == "" {
				continue
			}
			line, err := r.ReadString('\n')
			if err != nil || line != w {
				t.Fatalf("read %q, %v; want %q", line, err, w)
			}
		}
	}

	write("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$")
	if n := src.Commands(); n != 0 {
		t.Fatalf("half a command sent %d commands", n)
	}
	write("1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n")
	read("+OK\r\n$1\r\nv\r\n-ERR value is not an integer or out of range\r\n")
	if n := src.Commands(); n != 3 {
		t.Fatalf("3 commands sent %d", n)
	}

	write("*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*1\r\n$4\r\nPING\r\n*1\r\n$7\r\nDISCARD\r\n*1\r\n$11\r\nUNSUBSCRIBE\r\n")
	read("-ERR unknown command 'HELLO': the connection speaks RESP2 (locklab test)\r\n+PONG\r\n-ERR DISCARD without MULTI\r\n*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n")
	if n := src.Commands(); n != 3 {
		t.Fatalf("the commands answered locally sent %d through the source", n)
	}

	// Inside MULTI, PING and DISCARD go to the server.
	write("*1\r\n$5\r\nMULTI\r\n*1\r\n$4\r\nPING\r\n*1\r\n$7\r\nDISCARD\r\n")
	read("+OK\r\n+QUEUED\r\n+OK\r\n")
	if n := src.Commands(); n != 6 {
		t.Fatalf("MULTI PING DISCARD sent %d through the source, want 3", n)
	}
	if n := srv.Pool.ActiveCount() - srv.Pool.IdleCount(); n != 0 {
		t.Errorf("%d connections of the source held after DISCARD", n)
	}

	done := make(chan error, 1)
	go func() {
		_, err := r.ReadByte()
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Read with no reply queued returned %v, want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
	}

	// Not a command: the connection ends.
	c = respconn.New(src, respconn.Options{Name: "test"})
	if _, err := c.Write([]byte("PING\r\n")); err == nil {
		t.Fatal("Write of an inline command succeeded, want an error")
	}
}
