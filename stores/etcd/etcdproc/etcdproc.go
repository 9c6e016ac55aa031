// Package etcdproc runs throwaway etcd clusters for tests and for the
// harness: N members (3 by default) as local etcd processes on free
// loopback ports, their data directories in one temporary directory (in
// memory, under /dev/shm, where there is one: every write a member
// acknowledges is an fsync of its log, which a disk makes cost
// milliseconds; a throwaway cluster outlives no host).
// Faults are first-class: kill a member (SIGKILL), restart it on its data
// directory (its raft log and database kept) or on an emptied one, pause
// and resume it (SIGSTOP, SIGCONT), find the leader and kill it.
//
// The binary is Debian's etcd-server package (etcd 3.4 on Debian 12;
// scripts/ensure-etcd.sh installs it), or $LOCKLAB_ETCD.
//
// Every member is started with a heartbeat interval of 50ms and an
// election timeout of 500ms (etcd's defaults are 100ms and 1s): a killed
// or paused leader is replaced within 0.5 to 1s, and the smallest lease the
// server grants is 1s (etcd raises a shorter TTL to 1.5 election timeouts,
// rounded up to whole seconds: 2s with its default settings). Shorter
// timings elect faster (from a leader's kill to the next leader, 0.32s at
// 20ms and 200ms against 0.62s here) but not only when asked: on two
// cores at a load average near 60 a cluster at 20ms and 200ms went
// through five elections in 200 writes with no fault, and at 10ms and
// 100ms a leader's heartbeat went out 105ms apart at a load of 35.
// TestNoElectionUnderLoad holds the defaults to no election with every
// core busy. Options changes both. Members die with the process that
// started them (Pdeathsig), and Close removes every process and
// directory; directories of a run killed before it could close are
// removed by the next run's first Start.
package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// InstallHint tells how to get etcd where it is missing.
const InstallHint = "etcd not found on PATH: run scripts/ensure-etcd.sh " +
	"(Debian/Ubuntu: apt-get install -y etcd-server), or set LOCKLAB_ETCD to the etcd binary"

// The timing every member starts with unless Options says otherwise.
const (
	DefaultHeartbeatInterval = 50 * time.Millisecond
	DefaultElectionTimeout   = 500 * time.Millisecond
)

// DefaultMembers is the size of a cluster when Options.Members is 0.
const DefaultMembers = 3

// Binary returns the etcd to run: $LOCKLAB_ETCD, else the one on PATH,
// else /usr/bin/etcd. The error carries InstallHint.
func Binary() (string, error) {
	if p := os.Getenv("LOCKLAB_ETCD"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("LOCKLAB_ETCD=%q: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	if st, err := os.Stat("/usr/bin/etcd"); err == nil && !st.IsDir() {
		return "/usr/bin/etcd", nil
	}
	return "", errors.New(InstallHint)
}

// Version returns the version bin reports ("3.4.23"), or "unknown".
func Version(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "etcd Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// Options configure a cluster.
type Options struct {
	// Members is the number of members; 0 means DefaultMembers.
	Members int
	// HeartbeatInterval and ElectionTimeout are given to every member
	// (--heartbeat-interval, --election-timeout, in whole milliseconds);
	// 0 means DefaultHeartbeatInterval and DefaultElectionTimeout. etcd
	// refuses an election timeout under five heartbeats.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// StartTimeout bounds the wait for health at each start and restart
	// when the context given has no earlier deadline. Default 30s.
	StartTimeout time.Duration
	// Args are extra flags for every member ("--name=value" or "--name",
	// "value"), after the ones Start sets.
	Args []string
	// Backend is BackendProcess ("" too): members are local processes; or
	// BackendDocker: each member runs in a container of an image built
	// from Binary() (see docker.go), on a network of the cluster's own.
	Backend string
	// Label names a docker cluster in its labels (dockerbox.LabelName).
	Label string
}

// The backends of Options.Backend (internal/tooling/backends's).
const (
	BackendProcess = backends.Process
	BackendDocker  = backends.Docker
)

// Cluster is a running etcd cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	// Dir is the temporary directory that holds each member's data
	// directory and log; empty on the docker backend.
	Dir string
	// Bin is the etcd binary the members run.
	Bin string
	// Token is the --initial-cluster-token, unique to the cluster.
	Token string

	opts    Options
	members []*Member
	closed  atomic.Bool
	// closeOnce runs close once; closeErr is its result.
	closeOnce sync.Once
	closeErr  error
	// net is the docker backend's network, nil on the process backend.
	net *dockerbox.Network
}

// Member is one etcd process of a Cluster.
type Member struct {
	// Name is the member's --name ("m0", "m1", ...), and Index its place
	// in the cluster.
	Name  string
	Index int
	// ClientURL and PeerURL are the URLs it serves clients and peers on.
	ClientURL string
	PeerURL   string
	// DataDir is its --data-dir; LogPath the file its output goes to,
	// kept across restarts. On the docker backend DataDir is a path in
	// the member's container and LogPath is empty (LogTail reads the
	// container's log).
	DataDir string
	LogPath string
	// ID is its raft member id, known once Start returns.
	ID uint64

	c      *Cluster
	client *clientv3.Client // on ClientURL alone

	// Proc is the member's etcd process, here or in its container, and
	// the faults done to it (Kill, Stop, Cont).
	serverproc.Proc
}

// Start launches the members and returns once every one of them serves a
// linearizable read (which needs a leader and a quorum, and the member
// caught up with the leader's commit) and has been recognised by its name
// in the cluster's member list. ctx bounds the whole start. A cluster that
// does not come up is an error with the tail of the failing member's log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if opts.Members < 0 {
		return nil, fmt.Errorf("etcdproc: %d members", opts.Members)
	}
	if opts.Members == 0 {
		opts.Members = DefaultMembers
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.ElectionTimeout <= 0 {
		opts.ElectionTimeout = DefaultElectionTimeout
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	opts.Args = slices.Clone(opts.Args)
	switch opts.Backend {
	case "", BackendProcess:
	case BackendDocker:
		return startDocker(ctx, bin, opts)
	default:
		return nil, fmt.Errorf("etcdproc: backend %q: want %q or %q", opts.Backend, BackendProcess, BackendDocker)
	}
	sweep.Do(func() { RemoveStale() })
	return serverproc.OnFreePorts(ctx, func() (*Cluster, error) { return start(ctx, bin, opts) })
}
