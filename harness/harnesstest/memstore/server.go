// Package memstore is a store made for the tests: a lock server of a few
// dozen lines that runs in the test's own process, and the harness's side
// of it (a harness.Driver registered from init). Its locks are the family
// of its memlock package (mem-cas, a compare-and-set with a TTL and a
// fence number, and mem-cas's release broken on purpose, mem-del), which
// it imports, as a store under stores/ imports its family's package under
// strategies/. It is the worked example of docs/development.md's "Adding
// a store": importing it is all a test does to have the store and its
// strategies in the harness's matrix, and the harness's core names none of
// it.
//
//	server.go          the server: a line protocol over TCP, each lock's TTL on a clock the store moves
//	store.go           the node, the Driver and a slot's Store: each request a step
//	memlock/           the strategy family "memstore" (strategies.Register)
//
// It is not one of locklab's stores: stores/stores.go does not list it,
// and nothing but a test imports it.
package memstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a lock server on a loopback port. Each request is one line of
// words, each answer one line:
//
//	ACQ key token ms   OK fence, the lock taken for ms with the key's next fence; HELD
//	REL key token      OK, the lock deleted; NOTHELD, another token holds it or none does
//	DEL key            OK, the lock deleted whoever held it, or none was there
//	GET key            token fence ms-left; NIL
//	TICK key ms        how many locks ms made expire (0 or 1): time passes for key alone
//	RESET key          OK, the lock and its fence counter gone
//
// Time does not pass on the server by itself: a lock's TTL runs out only
// as TICK says, which the harness's Store sends as the run's virtual time
// passes (Store.Advance).
type Server struct {
	ln net.Listener

	mu     sync.Mutex
	locks  map[string]held
	fences map[string]int64
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// held is a lock: its holder's token, its fence, and the time it has left.
type held struct {
	token string
	fence int64
	left  time.Duration
}

// StartServer starts a server on a free loopback port.
func StartServer() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, locks: map[string]held{}, fences: map[string]int64{}, conns: map[net.Conn]bool{}}
	s.wg.Go(s.accept)
	return s, nil
}

// Addr is the server's "host:port".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server and closes its connections.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Go(func() { s.serve(c) })
	}
}

func (s *Server) serve(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewScanner(c)
	for r.Scan() {
		if _, err := fmt.Fprintf(c, "%s\n", s.do(strings.Fields(r.Text()))); err != nil {
			return
		}
	}
}

// do answers one request.
func (s *Server) do(w []string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	arg := func(i int) string {
		if i < len(w) {
			return w[i]
		}
		return ""
	}
	key := arg(1)
	switch strings.ToUpper(arg(0)) {
	case "ACQ":
		ms, err := strconv.ParseInt(arg(3), 10, 64)
		if len(w) != 4 || err != nil || ms <= 0 {
			return "ERR usage: ACQ key token ms"
		}
		if _, ok := s.locks[key]; ok {
			return "HELD"
		}
		s.fences[key]++
		s.locks[key] = held{token: w[2], fence: s.fences[key], left: time.Duration(ms) * time.Millisecond}
		return fmt.Sprintf("OK %d", s.fences[key])
	case "REL":
		if len(w) != 3 {
			return "ERR usage: REL key token"
		}
		if h, ok := s.locks[key]; !ok || h.token != w[2] {
			return "NOTHELD"
		}
		delete(s.locks, key)
		return "OK"
	case "DEL":
		if len(w) != 2 {
			return "ERR usage: DEL key"
		}
		delete(s.locks, key)
		return "OK"
	case "GET":
		h, ok := s.locks[key]
		if !ok {
			return "NIL"
		}
		return fmt.Sprintf("%s %d %d", h.token, h.fence, h.left.Milliseconds())
	case "TICK":
		ms, err := strconv.ParseInt(arg(2), 10, 64)
		if len(w) != 3 || err != nil || ms < 0 {
			return "ERR usage: TICK key ms"
		}
		h, ok := s.locks[key]
		if !ok {
			return "0"
		}
		if h.left -= time.Duration(ms) * time.Millisecond; h.left > 0 {
			s.locks[key] = h
			return "0"
		}
		delete(s.locks, key)
		return "1"
	case "RESET":
		delete(s.locks, key)
		delete(s.fences, key)
		return "OK"
	}
	return "ERR unknown request " + strconv.Quote(arg(0))
}

// errServer is an answer beginning with ERR.
var errServer = errors.New("memstore")

// NewConn returns a connection to the server at addr, dialed at its first
// request and again at the request after one that failed. It serves one
// request at a time.
func NewConn(addr string) *Conn { return &Conn{addr: addr} }

// Conn is a connection to a server.
type Conn struct {
	addr string

	mu sync.Mutex
	c  net.Conn
	r  *bufio.Reader
}

// Do sends the request made of words and returns the answer's line; ctx
// bounds both. An error of the connection closes it.
func (c *Conn) Do(ctx context.Context, words ...string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if c.c == nil {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return "", err
		}
		c.c, c.r = nc, bufio.NewReader(nc)
	}
	line, err := c.exchange(ctx, words)
	if err != nil {
		c.closeLocked()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", err
	}
	if rest, ok := strings.CutPrefix(line, "ERR "); ok {
		return "", fmt.Errorf("%w: %s", errServer, rest)
	}
	return line, nil
}

// exchange writes the request and reads its answer, ctx's end ending
// both. The caller holds mu.
func (c *Conn) exchange(ctx context.Context, words []string) (string, error) {
	dl, _ := ctx.Deadline()
	c.c.SetDeadline(dl)
	defer context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Now()) })()
	if _, err := fmt.Fprintf(c.c, "%s\n", strings.Join(words, " ")); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// Close closes the connection; the next request dials again.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked()
}

func (c *Conn) closeLocked() error {
	if c.c == nil {
		return nil
	}
	err := c.c.Close()
	c.c, c.r = nil, nil
	return err
}
