// The servers' audit: the sessions each server of the ensemble holds a
// connection of (the four-letter word cons) that the harness's
// connections were not given.

package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/internal/tooling/audit"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
)

// startAudit is the store's Driver.Audit. Every session the store's
// connections are given is noted on their node (sessionConn); once the
// runs are over and their connections closed, a connection that any
// running server of the ensemble still holds with a session (cons: its
// sid) other than those is a client of the lock's own beside the
// connection it was given (a *zk.Conn it dialled, one kept in a global),
// whose requests no run scheduled. The sessions are told apart by their
// ids, so that a connection of the harness's that a server has yet to
// drop is never taken for a stranger's. Only the connections still open
// are seen: a connection opened and closed inside one call is not, nor
// one to a server the run left killed or paused.
func startAudit(_ context.Context, nodes []harness.Node) (func(context.Context) error, error) {
	var ns []*Node
	for _, n := range nodes {
		if zn, ok := n.(*Node); ok {
			ns = append(ns, zn)
		}
	}
	return func(ctx context.Context) error {
		var errs []error
		for _, n := range ns {
			for _, s := range n.Ensemble.Servers() {
				if !s.Running() {
					continue
				}
				server := audit.Server{Name: n.Name() + " " + s.Name(), Addr: s.Addr()}
				out, err := zkproc.FourLetter(ctx, s.Addr(), "cons")
				if err != nil {
					errs = append(errs, server.Unread("cons", err))
					continue
				}
				if found := strangers(out, n.sessions.has); len(found) > 0 {
					errs = append(errs, server.Found(audit.NotOpened("holds", len(found), "session", found)))
				}
			}
		}
		return errors.Join(errs...)
	}, nil
}

// strangers returns, from a cons answer, the connections with a session
// that ours does not know, each as its client's address, its session id
// and its last operation. A line of cons is a connection:
//
//	/127.0.0.1:41234[1](queued=0,recved=3,sent=3,sid=0x1000a2b3c4d0000,lop=EXIS,est=...,to=60000,...)
//
// without sid while the connection has no session (cons's own has none).
func strangers(cons string, ours func(int64) bool) []string {
	var out []string
	for line := range strings.Lines(cons) {
		addr, rest, ok := strings.Cut(strings.TrimSpace(line), "[")
		if !ok {
			continue
		}
		_, rest, _ = strings.Cut(rest, "(")
		f := audit.Fields(strings.TrimSuffix(rest, ")"), ",")
		sid, err := strconv.ParseUint(strings.TrimPrefix(f["sid"], "0x"), 16, 64)
		if err != nil || sid == 0 || ours(int64(sid)) {
			continue
		}
		out = append(out, fmt.Sprintf("%s sid=0x%x lop=%s", strings.TrimPrefix(addr, "/"), sid, f["lop"]))
	}
	return out
}

// sessionSet is a set of session ids, safe for concurrent use; its zero
// value is empty.
type sessionSet struct {
	mu  sync.Mutex
	ids map[int64]bool
}

func (s *sessionSet) add(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[int64]bool{}
	}
	s.ids[id] = true
}

func (s *sessionSet) has(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// sessionConn is a connection of the store's to a server, which notes
// the session the answer to its handshake gives (the first frame it
// reads) in sessions: a new one, or the one it reconnected to.
type sessionConn struct {
	net.Conn
	sessions *sessionSet
	// first is what was read of the first frame while it is not whole;
	// noted: it was read.
	first []byte
	noted bool
}

// Read reads from the connection, noting the session of the first frame.
func (c *sessionConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.noted || n == 0 {
		return n, err
	}
	c.first = append(c.first, b[:n]...)
	if len(c.first) < 4 {
		return n, err
	}
	size := int(binary.BigEndian.Uint32(c.first))
	if len(c.first) < 4+size {
		return n, err
	}
	if s, rerr := readConnectResponse(c.first[4 : 4+size]); rerr == nil && s.id != 0 {
		c.sessions.add(s.id)
	}
	c.first, c.noted = nil, true
	return n, err
}
