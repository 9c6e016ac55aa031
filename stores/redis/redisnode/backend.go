// The backends behind a cluster: the options Start takes, and the
// two interfaces a backend implements, one to start servers and one to
// control each of them.

package redisnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/internal/tooling/backends"

	"github.com/gomodule/redigo/redis"
)

// Options configure Start. The zero value (apart from N) starts N
// redis-servers without persistence on the automatically chosen backend.
type Options struct {
	// Backend is "docker", "process", "addrs" or "" for automatic: the value
	// of $LOCKLAB_BACKEND if set, else docker when a Docker engine answers
	// quickly, else process when redis-server is installed, else an error
	// that says how to install either.
	Backend string
	// N is the number of nodes, at least 1. With the addrs backend, 0 means
	// one node per address.
	N int
	// Image is the Docker image to run. Default: $LOCKLAB_REDIS_IMAGE, else
	// "redis:7". When it is not present locally and cannot be pulled within
	// a few seconds, an image is built locally from the host's redis-server.
	Image string
	// Addrs are the servers of the addrs backend: "host:port",
	// "password@host:port", or a redis:// or rediss:// URL with an ACL
	// user, a database and TLS (see redisaddr.Parse).
	Addrs []string
	// AppendOnly turns on the append-only file on every node, with the fsync
	// policy AppendFsync ("always", "everysec" or "no"; default "everysec").
	// Node.SetAppendOnly changes it for one node.
	AppendOnly  bool
	AppendFsync string
	// Label names the cluster in container names and labels (for example the
	// test name); it may be empty.
	Label string
	// StartTimeout bounds the wait for each node's first PONG. Default 10s.
	StartTimeout time.Duration
}

// persistence is the append-only configuration of one node.
type persistence struct {
	appendOnly bool
	fsync      string
}

// server is one backend's control over a redis-server.
type server interface {
	// addr is what clients dial.
	addr() string
	// peerAddr is how the other nodes of the cluster (replicas) reach it.
	peerAddr() string
	pause(ctx context.Context) error
	resume(ctx context.Context) error
	kill(ctx context.Context) error
	restart(ctx context.Context, keepData bool) error
	partition(ctx context.Context) error
	heal(ctx context.Context) error
	// persist records the append-only setting for later restarts; c is a
	// connection to the server, already switched with CONFIG SET.
	persist(ctx context.Context, c redis.Conn, p persistence) error
	logTail(n int) string
	close() error
}

// backend starts servers.
type backend interface {
	name() string
	// describe names what runs the servers, e.g. "process /usr/bin/redis-server".
	describe() string
	start(ctx context.Context, idx int, name string, p persistence) (server, error)
	// startSentinel starts a redis-server in Sentinel mode with the
	// sentinel directives conf (one per line).
	startSentinel(ctx context.Context, idx int, name, conf string) (server, error)
	// startClusterNode starts a redis-server with --cluster-enabled yes
	// (rcluster.Directives) that announces the address clients dial, and
	// returns it with its cluster bus port as the other nodes reach it (0:
	// the port plus 10000).
	startClusterNode(ctx context.Context, idx int, name string, p persistence, nodeTimeout time.Duration) (server, int, error)
	close() error
}

// autoBackend picks docker when an engine answers, else process.
func autoBackend(ctx context.Context, opts Options) (backend, error) {
	dbe, derr := newDocker(ctx, opts)
	if derr == nil {
		return dbe, nil
	}
	if !errors.Is(derr, errNoEngine) {
		return nil, derr
	}
	pbe, perr := newProcess(opts)
	if perr == nil {
		return pbe, nil
	}
	return nil, fmt.Errorf("node: no backend available.\n"+
		"  docker: %v\n"+
		"    install Docker (https://docs.docker.com/engine/install/) and make sure the engine runs and $DOCKER_HOST (or /var/run/docker.sock) reaches it;\n"+
		"  process: %v\n"+
		"  or give the addresses of running servers with backend %q (Options.Addrs)", derr, perr, backends.Addrs)
}

func unsupported(op, name string) error {
	return fmt.Errorf("%w: cannot %s node %s: the addrs backend talks to servers it does not control; "+
		"use the docker or process backend for faults", fault.ErrUnsupported, op, name)
}
