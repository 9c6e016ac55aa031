// The start of the members: on the process backend their ports and
// directories (start), and on both backends their flags, their launch, and
// the wait until each serves a linearizable read and is known by its raft
// id.

package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/procid"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

func start(ctx context.Context, bin string, opts Options) (*Cluster, error) {
	dir, err := procid.MkdirTemp(dirPrefix)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Bin: bin, Token: "locklab-" + filepath.Base(dir), opts: opts}
	// Tracked from its directory on: a signal in the middle of the start
	// removes what was made (a failed start's Close untracks it).
	cleanup.Track(c)
	ports, err := freePorts(2 * opts.Members)
	if err != nil {
		c.Close()
		return nil, err
	}
	for i := range opts.Members {
		name := "m" + strconv.Itoa(i)
		m := &Member{
			Name: name, Index: i,
			ClientURL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			PeerURL:   "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1])),
			DataDir:   filepath.Join(dir, name+".etcd"),
			LogPath:   filepath.Join(dir, name+".log"),
			c:         c,
		}
		m.What, m.Timeout = "etcdproc: member "+name, opts.StartTimeout
		c.members = append(c.members, m)
	}
	fail := func(err error) (*Cluster, error) {
		c.Close()
		return nil, err
	}
	for _, m := range c.members {
		if m.client, err = clientv3.New(ClientConfig(m.ClientURL)); err != nil {
			return fail(err)
		}
	}
	cluster := c.initialCluster()
	for _, m := range c.members {
		if err := m.launch(cluster); err != nil {
			return fail(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := c.waitHealthy(wctx, c.members); err != nil {
		return fail(err)
	}
	if err := c.identify(wctx); err != nil {
		return fail(err)
	}
	return c, nil
}

// args are the flags of m's process.
func (m *Member) args(cluster string) []string {
	o := m.c.opts
	listen := m.ClientURL
	if m.Box() != nil {
		listen = "http://0.0.0.0:2379"
	}
	args := []string{
		"--name", m.Name,
		"--data-dir", m.DataDir,
		"--listen-client-urls", listen,
		"--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL,
		"--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", cluster,
		"--initial-cluster-token", m.c.Token,
		"--initial-cluster-state", "new", // ignored once the data directory holds a WAL
		"--heartbeat-interval", strconv.FormatInt(o.HeartbeatInterval.Milliseconds(), 10),
		"--election-timeout", strconv.FormatInt(o.ElectionTimeout.Milliseconds(), 10),
		"--logger", "zap",
		"--log-outputs", "stderr",
	}
	return append(args, o.Args...)
}

// initialCluster is the --initial-cluster flag of every member.
func (c *Cluster) initialCluster() string {
	var parts []string
	for _, m := range c.members {
		parts = append(parts, m.Name+"="+m.PeerURL)
	}
	return strings.Join(parts, ",")
}

// launch starts m's process (and returns at once: a member alone cannot
// answer until a quorum is up).
func (m *Member) launch(cluster string) error {
	args := m.args(cluster)
	return m.Launch(serverproc.Spec{
		Check: func() error {
			if m.c.closed.Load() { // Close kills what started before this
				return errors.New("etcdproc: cluster closed")
			}
			return nil
		},
		Local: append([]string{m.c.Bin}, args...), InBox: append([]string{"etcd"}, args...),
		Dir: m.c.Dir, LogPath: m.LogPath,
		// etcd reads ETCD_* variables as flags: none of this process's.
		DropEnv: func(kv string) bool { return strings.HasPrefix(kv, "ETCD_") },
	})
}

// waitHealthy polls each of ms until it serves a linearizable read, ctx
// ends, or one of them exits.
func (c *Cluster) waitHealthy(ctx context.Context, ms []*Member) error {
	pending := slices.Clone(ms)
	delay := 5 * time.Millisecond
	lastErr := map[string]error{}
	for {
		var still []*Member
		for _, m := range pending {
			exited := m.Exited()
			select {
			case <-exited:
				return m.exitError()
			default:
			}
			if m.Box() != nil && !m.BoxAlive(ctx) {
				return m.exitError()
			}
			if err := m.healthy(ctx, exited); err != nil {
				lastErr[m.Name] = err
				still = append(still, m)
			}
		}
		if pending = still; len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			m := pending[0]
			return fmt.Errorf("etcd member %s (%s) not healthy: %w (last: %v)\n%s",
				m.Name, m.ClientURL, ctx.Err(), lastErr[m.Name], m.LogTail(10))
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// exitError describes a member that exited while it was awaited.
func (m *Member) exitError() error {
	tail := m.LogTail(10)
	err := fmt.Errorf("etcd member %s (%s) exited\n%s", m.Name, m.ClientURL, tail)
	if strings.Contains(tail, "address already in use") {
		err = fmt.Errorf("%w: %w", serverproc.ErrPortTaken, err)
	}
	return err
}

// healthy does what etcd's own health check does: a linearizable read of
// the key "health" through m's endpoint alone, given up after 1s or when
// exited (the process's) is closed.
func (m *Member) healthy(ctx context.Context, exited <-chan struct{}) error {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	go func() {
		select {
		case <-exited:
			cancel()
		case <-cctx.Done():
		}
	}()
	_, err := m.client.Get(cctx, "health")
	return err
}

// identify learns each member's id from the member list and checks that
// the cluster answering on the members' URLs is this one.
func (c *Cluster) identify(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.members[0].client.MemberList(cctx)
	if err != nil {
		return fmt.Errorf("etcd member list: %w", err)
	}
	if len(resp.Members) != len(c.members) {
		return fmt.Errorf("etcd member list has %d members, want %d", len(resp.Members), len(c.members))
	}
	for _, m := range c.members {
		found := false
		for _, pm := range resp.Members {
			if pm.Name == m.Name && slices.Equal(pm.PeerURLs, []string{m.PeerURL}) && slices.Equal(pm.ClientURLs, []string{m.ClientURL}) {
				m.ID, found = pm.ID, true
			}
		}
		if !found {
			return fmt.Errorf("etcd member list does not name %s at %s (%v): another cluster holds the port", m.Name, m.PeerURL, resp.Members)
		}
		st, err := m.client.Status(cctx, m.ClientURL)
		if err != nil {
			return fmt.Errorf("etcd member %s status: %w", m.Name, err)
		}
		if st.Header.MemberId != m.ID {
			return fmt.Errorf("etcd on %s is member %x, not %s (%x)", m.ClientURL, st.Header.MemberId, m.Name, m.ID)
		}
	}
	return nil
}

// freePorts asks the kernel for n distinct free loopback TCP ports,
// holding each until all are picked.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
