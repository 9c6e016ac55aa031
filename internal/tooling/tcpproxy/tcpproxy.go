// Package tcpproxy is a loopback TCP proxy in front of a server: cutting
// it is how a partition is made, healing it closes what it held meanwhile.
// Redis's process backend puts one in front of every redis-server, and
// the other stores' stress runs and docker tests one in front of a
// member's client address.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a loopback TCP proxy in front of one server: clients dial Addr
// instead of the server. While cut, it forwards nothing: open connections
// lose their upstream and every byte clients send is swallowed without an
// answer, and new connections are accepted but never forwarded, so clients
// time out as in a network partition. Heal closes the connections held
// during the cut; later ones are forwarded again. Only the traffic through
// the proxy is cut: whatever reaches the server by another way (a
// cluster's peer traffic) is not.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	isCut  bool
	closed bool
	pairs  map[*pair]struct{}
	held   map[net.Conn]struct{}
	wg     sync.WaitGroup
}

type pair struct {
	client, up net.Conn
	held       bool // upstream cut: keep the client silent
}

// New listens on a free loopback port and forwards to target
// ("host:port").
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return Serve(ln, target), nil
}

// Serve forwards what ln accepts to target. Listening first lets the
// server behind it learn the proxy's address before it starts.
func Serve(ln net.Listener, target string) *Proxy {
	p := &Proxy{ln: ln, target: target, pairs: map[*pair]struct{}{}, held: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p
}

// Addr is the address clients dial, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		if p.isCut {
			p.holdLocked(c)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.forward(c)
	}
}

// holdLocked swallows what c sends until it closes or Heal closes it.
func (p *Proxy) holdLocked(c net.Conn) {
	p.held[c] = struct{}{}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		io.Copy(io.Discard, c)
		c.Close()
		p.mu.Lock()
		delete(p.held, c)
		p.mu.Unlock()
	}()
}

func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	pr := &pair{client: c, up: up}
	p.mu.Lock()
	if p.closed || p.isCut {
		up.Close()
		if p.closed {
			c.Close()
		} else {
			p.holdLocked(c)
		}
		p.mu.Unlock()
		return
	}
	p.pairs[pr] = struct{}{}
	p.mu.Unlock()

	done := make(chan struct{})
	go func() {
		io.Copy(c, up) // server to client
		p.mu.Lock()
		if !pr.held {
			c.Close()
		}
		p.mu.Unlock()
		close(done)
	}()
	io.Copy(up, c) // client to server
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.pairs, pr)
	held := pr.held
	p.mu.Unlock()
	if held {
		// The cut came while this connection was open: the remaining bytes
		// from the client go nowhere.
		p.mu.Lock()
		if !p.closed && p.isCut {
			p.holdLocked(c)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		c.Close()
	}
}

// Cut starts a partition between the clients and the server.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	for pr := range p.pairs {
		pr.held = true
		pr.up.Close()
	}
}

// Heal ends the partition, closing the connections held during it.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = false
	for c := range p.held {
		c.Close()
	}
	for pr := range p.pairs {
		if pr.held {
			pr.client.Close()
		}
	}
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.ln.Close()
	for c := range p.held {
		c.Close()
	}
	for pr := range p.pairs {
		pr.client.Close()
		pr.up.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Retarget sends the connections made from now on to target: an address
// that moves with a primary that failed over. Those made before stay
// with the server they reached.
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}
