// The process backend: redis-server processes on loopback ports, each behind
// a proxy, paused and resumed with signals, killed and restarted.

package redisnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/rcluster"
	"github.com/locklab/locklab/internal/tooling/redisproc"
	"github.com/locklab/locklab/internal/tooling/tcpproxy"
)

// processBackend runs redis-server processes on loopback ports, each with its
// own working directory and behind a loopback TCP proxy that Partition cuts.
type processBackend struct {
	bin     string
	timeout time.Duration
}

func newProcess(opts Options) (*processBackend, error) {
	bin, err := redisproc.Binary()
	if err != nil {
		return nil, fmt.Errorf("node: process backend: %w", err)
	}
	return &processBackend{bin: bin, timeout: opts.StartTimeout}, nil
}

func (b *processBackend) name() string     { return backends.Process }
func (b *processBackend) describe() string { return "process " + b.bin }
func (b *processBackend) close() error     { return nil }

func (b *processBackend) start(ctx context.Context, _ int, name string, p persistence) (server, error) {
	// The proxy listens first, so that the server can announce the
	// proxy's address to its master (replica-announce-*): the master, and
	// the Sentinels that read its INFO, then list the replica at the
	// address clients dial, across restarts too.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("node %s: proxy: %w", name, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	srv, err := redisproc.Start(redisproc.Options{
		AppendOnly:   p.appendOnly,
		AppendFsync:  p.fsync,
		StartTimeout: b.timeout,
		Args:         []string{"--replica-announce-ip", "127.0.0.1", "--replica-announce-port", port},
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return &processServer{srv: srv, px: tcpproxy.Serve(ln, srv.Addr), direct: srv.Addr}, nil
}

// startSentinel runs redis-server in Sentinel mode with the configuration
// conf. A Sentinel sits behind a proxy like the data nodes, so that it can
// be partitioned too; it announces the proxy's address to the other
// Sentinels.
func (b *processBackend) startSentinel(ctx context.Context, _ int, name, conf string) (server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("node %s: proxy: %w", name, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	srv, err := redisproc.Start(redisproc.Options{
		Config:       conf + "sentinel announce-ip 127.0.0.1\nsentinel announce-port " + port + "\n",
		StartTimeout: b.timeout,
		Args:         []string{"--sentinel"},
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return &processServer{srv: srv, px: tcpproxy.Serve(ln, srv.Addr), direct: srv.Addr}, nil
}

// startClusterNode runs a cluster node behind a proxy like the others. It
// announces the proxy's address (cluster-announce-*, and
// replica-announce-* to its master), so that CLUSTER SLOTS and MOVED send
// clients through the proxy, and a cluster bus port of its own
// (cluster-port), which the other nodes reach directly: a partition cuts
// the node off from clients and from the replication links through the
// proxy, not from the cluster bus.
func (b *processBackend) startClusterNode(ctx context.Context, _ int, name string, p persistence, nodeTimeout time.Duration) (server, int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, fmt.Errorf("node %s: proxy: %w", name, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	// The node announces its bus port as it is (cluster-port, which
	// redisproc picks free on each try), with no cluster-announce-bus-port.
	args := append(rcluster.Args(nodeTimeout),
		"--cluster-announce-ip", "127.0.0.1",
		"--cluster-announce-port", port,
		"--replica-announce-ip", "127.0.0.1", "--replica-announce-port", port)
	srv, err := redisproc.Start(redisproc.Options{
		AppendOnly:   p.appendOnly,
		AppendFsync:  p.fsync,
		StartTimeout: b.timeout,
		Args:         args,
		ClusterBus:   true,
	})
	if err != nil {
		ln.Close()
		return nil, 0, fmt.Errorf("node %s: %w", name, err)
	}
	return &processServer{srv: srv, px: tcpproxy.Serve(ln, srv.Addr), direct: srv.Addr}, srv.BusPort, nil
}

// processServer is one redis-server process and its proxy.
type processServer struct {
	mu     sync.Mutex
	srv    *redisproc.Server
	px     *tcpproxy.Proxy
	paused bool
	// direct is the redis-server's own address: a restart keeps its port.
	direct string
}

func (s *processServer) addr() string     { return s.px.Addr() }
func (s *processServer) peerAddr() string { return s.px.Addr() }

func (s *processServer) directAddr() string { return s.direct }

func (s *processServer) pause(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.srv.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	s.paused = true
	return nil
}

func (s *processServer) resume(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.srv.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	s.paused = false
	return nil
}

func (s *processServer) kill(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv.Pid() == 0 {
		return errors.New("not running")
	}
	s.srv.Kill()
	s.paused = false
	return nil
}

func (s *processServer) restart(_ context.Context, keepData bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv.Kill()
	s.paused = false
	if !keepData {
		if err := wipeDir(s.srv.Dir, filepath.Base(s.srv.LogPath)); err != nil {
			return err
		}
	}
	return s.srv.Restart()
}

// wipeDir removes everything in dir but the file named keep.
func wipeDir(dir, keep string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == keep {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (s *processServer) partition(context.Context) error { s.px.Cut(); return nil }
func (s *processServer) heal(context.Context) error      { s.px.Heal(); return nil }

func (s *processServer) persist(_ context.Context, _ redis.Conn, p persistence) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv.SetAppendOnly(p.appendOnly, p.fsync)
	return nil
}

func (s *processServer) logTail(n int) string { return s.srv.LogTail(n) }

func (s *processServer) close() error {
	s.px.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv.Stop()
	return nil
}
