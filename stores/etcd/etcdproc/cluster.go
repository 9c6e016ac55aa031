// A running cluster: its clients and members, its leader, and Close.

package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// ClientConfig is a client configuration for endpoints that suits a
// cluster whose members come and go: no logging, a dial timeout of 2s, and
// reconnection tried again within 250ms rather than gRPC's default of up
// to two minutes.
func ClientConfig(endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
	}
}

// Endpoints are the members' client URLs ("http://127.0.0.1:port"), in
// member order.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.ClientURL
	}
	return out
}

// ClientConfig is ClientConfig on every member's endpoint.
func (c *Cluster) ClientConfig() clientv3.Config { return ClientConfig(c.Endpoints()...) }

// Client returns a new client on every member's endpoint (ClientConfig);
// the caller closes it.
func (c *Cluster) Client() (*clientv3.Client, error) { return clientv3.New(c.ClientConfig()) }

// Members returns the members, in order.
func (c *Cluster) Members() []*Member { return slices.Clone(c.members) }

// Member returns member i (0-based); it panics when there is none.
func (c *Cluster) Member(i int) *Member { return c.members[i] }

// ByID returns the member with raft id id, or nil.
func (c *Cluster) ByID(id uint64) *Member {
	for _, m := range c.members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// Leader returns the leader, asking every running member (not killed, not
// paused) for its status with the maintenance API: the member that reports
// itself as leader in the highest raft term. It waits, polling, while no
// member does (an election after the leader died), until ctx ends.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	delay := 5 * time.Millisecond
	var last error
	for {
		m, err := c.leaderNow(ctx)
		if err == nil {
			return m, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcd: no leader: %w (last: %v)", ctx.Err(), last)
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// leaderNow asks the running members once, in parallel.
func (c *Cluster) leaderNow(ctx context.Context) (*Member, error) {
	type answer struct {
		m   *Member
		st  *clientv3.StatusResponse
		err error
	}
	var running []*Member
	for _, m := range c.members {
		if m.Running() {
			running = append(running, m)
		}
	}
	if len(running) == 0 {
		return nil, errors.New("no member running")
	}
	answers := make(chan answer, len(running))
	for _, m := range running {
		go func() {
			st, err := m.Status(ctx)
			answers <- answer{m, st, err}
		}()
	}
	var best *answer
	var errs []error
	for range running {
		a := <-answers
		if a.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.m.Name, a.err))
			continue
		}
		if a.st.Leader != 0 && a.st.Leader == a.st.Header.MemberId && (best == nil || a.st.RaftTerm > best.st.RaftTerm) {
			best = &a
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no member reports itself leader (%v)", errors.Join(errs...))
	}
	return best.m, nil
}

// KillLeader kills the leader (SIGKILL) and returns it. A new leader is
// elected among the others if they are a quorum: Leader waits for it.
func (c *Cluster) KillLeader(ctx context.Context) (*Member, error) {
	m, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	m.Kill()
	return m, nil
}

// WaitHealthy returns once every running member (not killed, not paused)
// serves a linearizable read through its own endpoint, or ctx ends.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	var running []*Member
	for _, m := range c.members {
		if m.Running() {
			running = append(running, m)
		}
	}
	return c.waitHealthy(ctx, running)
}

// Reset kills every member, empties their data directories and starts
// them all again, as on the cluster's first start: a cluster of the same
// members and ids, with none of the history it had (a run that lost a
// member's data leaves the members' logs at odds). It returns once every
// member serves a linearizable read. The process backend only.
func (c *Cluster) Reset(ctx context.Context) error {
	if c.net != nil {
		return errors.New("etcdproc: Reset on the docker backend")
	}
	wctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	return serverproc.Retry(wctx, func() error { return c.reset(wctx) }, func() {
		for _, m := range c.members {
			m.Kill()
		}
	}, serverproc.PortTaken)
}

func (c *Cluster) reset(ctx context.Context) error {
	for _, m := range c.members {
		m.Kill()
	}
	for _, m := range c.members {
		if err := os.RemoveAll(m.DataDir); err != nil {
			return err
		}
	}
	cluster := c.initialCluster()
	for _, m := range c.members {
		if err := m.launch(cluster); err != nil {
			return err
		}
	}
	return c.waitHealthy(ctx, c.members)
}

// Close kills every member, closes the clients it kept and removes Dir. It
// is safe to call more than once.
func (c *Cluster) Close() error {
	// A second Close (the program's, after the signal handler's) waits for
	// the first: a process that exits once it returns must not cut the
	// removal of the directory short.
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Cluster) close() error {
	c.closed.Store(true)
	defer cleanup.Untrack(c)
	for _, m := range c.members {
		m.Kill()
		if m.client != nil {
			m.client.Close()
		}
	}
	if c.net != nil {
		return c.closeDocker()
	}
	return os.RemoveAll(c.Dir)
}
