// The addrs backend: servers the user already runs, given by address
// (redisaddr.Parse reads them), which the harness pings but cannot fault.

package redisnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/redisaddr"
)

// addrsBackend uses servers the user already runs.
type addrsBackend struct {
	servers []*addrServer
}

// parseAddr reads one address of the addrs backend.
func parseAddr(s string) (*addrServer, error) {
	o, err := redisaddr.Parse(s)
	if err != nil {
		return nil, err
	}
	return &addrServer{hostport: o.Addr, opts: o}, nil
}

func newAddrs(opts Options) (*addrsBackend, error) {
	if len(opts.Addrs) == 0 {
		return nil, fmt.Errorf("node: backend %q needs Addrs (host:port, password@host:port or a redis:// URL)", backends.Addrs)
	}
	if opts.N > len(opts.Addrs) {
		return nil, fmt.Errorf("node: N=%d but only %d addresses given", opts.N, len(opts.Addrs))
	}
	b := &addrsBackend{}
	for _, s := range opts.Addrs {
		a, err := parseAddr(s)
		if err != nil {
			return nil, err
		}
		a.timeout = opts.StartTimeout
		b.servers = append(b.servers, a)
	}
	return b, nil
}

func (b *addrsBackend) name() string { return backends.Addrs }

func (b *addrsBackend) describe() string {
	var s []string
	for _, a := range b.servers {
		s = append(s, a.hostport)
	}
	return "addrs " + strings.Join(s, ",")
}

func (b *addrsBackend) start(ctx context.Context, idx int, name string, _ persistence) (server, error) {
	if idx >= len(b.servers) {
		return nil, unsupported("start", name)
	}
	a := b.servers[idx]
	if err := a.waitPing(ctx); err != nil {
		return nil, fmt.Errorf("node %s: server at %s does not answer: %w", name, a.hostport, err)
	}
	return a, nil
}

func (b *addrsBackend) startSentinel(_ context.Context, _ int, name, _ string) (server, error) {
	return nil, unsupported("start", name)
}

func (b *addrsBackend) startClusterNode(_ context.Context, _ int, name string, _ persistence, _ time.Duration) (server, int, error) {
	return nil, 0, unsupported("start", name)
}

func (b *addrsBackend) close() error { return nil }

// addrServer is a server the harness does not control.
type addrServer struct {
	hostport string
	// opts are the user, password, database and TLS of the address.
	opts    locklab.PoolOptions
	timeout time.Duration
}

// waitPing pings the server until it answers PONG, for up to the start
// timeout (3s at most). A server that answers with an error other than
// LOADING (a wrong password, a user without PING) will not change its
// answer, nor will a certificate the client does not trust: that error is
// returned at once.
func (a *addrServer) waitPing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(a.timeout, 3*time.Second))
	defer cancel()
	var last error
	delay := 5 * time.Millisecond
	for {
		last = a.ping(ctx)
		if last == nil {
			return nil
		}
		if re, ok := errors.AsType[redis.Error](last); ok && !strings.HasPrefix(string(re), "LOADING") {
			return last
		}
		if _, ok := errors.AsType[*tls.CertificateVerificationError](last); ok {
			return last // a certificate the client does not trust stays untrusted
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

func (a *addrServer) ping(ctx context.Context) error {
	o := a.opts
	o.DialTimeout, o.ReadTimeout = time.Second, time.Second
	opts, err := o.DialOptions()
	if err != nil {
		return err
	}
	c, err := redis.DialContext(ctx, "tcp", a.hostport, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = redis.DoContext(c, ctx, "PING")
	return err
}

func (a *addrServer) addr() string                 { return a.hostport }
func (a *addrServer) peerAddr() string             { return a.hostport }
func (a *addrServer) pause(context.Context) error  { return unsupported("pause", a.hostport) }
func (a *addrServer) resume(context.Context) error { return unsupported("resume", a.hostport) }
func (a *addrServer) kill(context.Context) error   { return unsupported("kill", a.hostport) }
func (a *addrServer) partition(context.Context) error {
	return unsupported("partition", a.hostport)
}
func (a *addrServer) heal(context.Context) error { return unsupported("heal", a.hostport) }
func (a *addrServer) restart(context.Context, bool) error {
	return unsupported("restart", a.hostport)
}
func (a *addrServer) persist(context.Context, redis.Conn, persistence) error { return nil }
func (a *addrServer) logTail(int) string {
	return "(no log: " + a.hostport + " is not run by the harness)"
}
func (a *addrServer) close() error { return nil }
