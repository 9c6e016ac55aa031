// Package etcdproc runs throwaway etcd clusters for tests and for the
// harness: N members (3 by default) as local etcd processes on free
// loopback ports, their data directories in one temporary directory (in
// memory, under /dev/shm, where there is one: every write a member
// acknowledges is an fsync of its log, which a disk makes cost
// milliseconds; a throwaway cluster outlives no host).
// Faults are first-class: kill a member (SIGKILL), restart it on its data
// directory (its raft log and database kept), pause and resume it
// (SIGSTOP, SIGCONT), find the leader and kill it.
//
// The binary is Debian's etcd-server package (etcd 3.4 on Debian 12;
// scripts/ensure-etcd.sh installs it), or $LOCKLAB_ETCD.
//
// Every member is started with a heartbeat interval of 50ms and an
// election timeout of 500ms (etcd's defaults are 100ms and 1s): a killed
// or paused leader is replaced within 0.5 to 1s, and the smallest lease the
// server grants is 1s (etcd raises a shorter TTL to 1.5 election timeouts,
// rounded up to whole seconds: 2s with its default settings). Options
// changes both. Members die with the process that started them
// (Pdeathsig), and Close removes every process and directory; directories
// of a run killed before it could close are removed by the next run's
// first Start.
package etcdproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/procid"
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

// The backends of Options.Backend.
const (
	BackendProcess = "process"
	BackendDocker  = "docker"
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

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool
	// box is the member's container on the docker backend, and pid its
	// etcd's pid there (0: not running); cmd and done stay nil.
	box *dockerbox.Container
	pid int
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
	var last error
	for range 3 { // another process may take a port between the pick and the bind
		c, err := start(ctx, bin, opts)
		if err == nil {
			return c, nil
		}
		last = err
		if !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// errPortTaken marks a start that failed because a port was in use.
var errPortTaken = errors.New("port in use")

func start(ctx context.Context, bin string, opts Options) (*Cluster, error) {
	dir, err := mkdirTemp(dirPrefix + procid.Tag())
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
	if m.box != nil {
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c.closed.Load() { // Close kills what started before this
		return errors.New("etcdproc: cluster closed")
	}
	if m.cmd != nil || m.pid != 0 {
		return fmt.Errorf("etcdproc: member %s is running", m.Name)
	}
	if m.box != nil {
		return m.launchBox(cluster)
	}
	log, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(m.c.Bin, m.args(cluster)...)
	cmd.Dir = m.c.Dir
	cmd.Stdout, cmd.Stderr = log, log
	// etcd reads ETCD_* variables as flags: none of this process's.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcd member %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	m.cmd, m.done, m.stopped = cmd, done, false
	return nil
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
			if m.box != nil && !m.boxAlive(ctx) {
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
		err = fmt.Errorf("%w: %w", errPortTaken, err)
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

// Status asks m for its status (maintenance API), within 1s or ctx.
func (m *Member) Status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return m.client.Status(cctx, m.ClientURL)
}

// Client is the cluster's client on m's endpoint alone; it belongs to the
// cluster, which closes it: do not close it.
func (m *Member) Client() *clientv3.Client { return m.client }

// Pid is the process id, or 0 when it is not running.
func (m *Member) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.box != nil {
		return m.pid
	}
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Exited is closed when the current process has exited (nil when none was
// started).
func (m *Member) Exited() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// Running reports whether m's process runs and is not paused.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.box != nil {
		return m.pid != 0 && !m.stopped
	}
	if m.cmd == nil || m.stopped {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Kill kills the process with SIGKILL, as a crash would, and waits for it
// to exit. The data directory stays for Restart. Killing a member that
// is not running does nothing.
func (m *Member) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.killLocked()
}

func (m *Member) killLocked() {
	if m.box != nil {
		m.killBox()
		return
	}
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot be reaped
	m.cmd.Process.Kill()
	<-m.done
	m.cmd, m.stopped = nil, false
}

// Restart kills the process if it runs and starts it again with the same
// flags on the same data directory, so that it comes back with its raft
// log and database and rejoins as the same member. It returns once m
// serves a linearizable read: it has caught up with the leader.
func (m *Member) Restart(ctx context.Context) error {
	m.Kill()
	wctx, cancel := context.WithTimeout(ctx, m.c.opts.StartTimeout)
	defer cancel()
	delay := 10 * time.Millisecond
	for {
		if err := m.launch(m.c.initialCluster()); err != nil {
			return err
		}
		err := m.c.waitHealthy(wctx, []*Member{m})
		if err == nil {
			return nil
		}
		m.Kill()
		if !errors.Is(err, errPortTaken) || wctx.Err() != nil {
			return err
		}
		select { // the port may linger a moment after the kill
		case <-wctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// Stop pauses the process with SIGSTOP, as a frozen host would: its
// connections stay open and it answers nothing, to clients or peers.
func (m *Member) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.box != nil {
		return m.signalBox("STOP", true)
	}
	if m.cmd == nil {
		return fmt.Errorf("etcdproc: member %s not running", m.Name)
	}
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	m.stopped = true
	return nil
}

// Cont resumes a process paused by Stop.
func (m *Member) Cont() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.box != nil {
		return m.signalBox("CONT", false)
	}
	if m.cmd == nil {
		return fmt.Errorf("etcdproc: member %s not running", m.Name)
	}
	if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	m.stopped = false
	return nil
}

// LogTail returns the last n lines of the member's log.
func (m *Member) LogTail(n int) string {
	if m.box != nil {
		return m.box.LogTail(n)
	}
	b, err := os.ReadFile(m.LogPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
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

// dirPrefix starts the name of the temporary directories: dirPrefix + pid
// + "-" + start time + "-" + random, naming the process that owns it.
const dirPrefix = "locklab-etcd-"

var sweep sync.Once

// RemoveStale removes the temporary directories of clusters whose owning
// process is gone (a run killed before it could close them; its etcd
// processes died with it). Those of live processes stay. Start calls it
// once per process; it returns the directories it removed.
func RemoveStale() []string {
	var removed []string
	for _, base := range []string{shmDir, os.TempDir()} {
		removed = append(removed, procid.RemoveStale(base, dirPrefix, nil)...)
	}
	return removed
}

// shmDir is the memory-backed file system of Linux.
const shmDir = "/dev/shm"

// mkdirTemp makes a cluster's directory: in shmDir where it can, else in
// the system's temporary directory.
func mkdirTemp(pattern string) (string, error) {
	if dir, err := os.MkdirTemp(shmDir, pattern); err == nil {
		return dir, nil
	}
	return os.MkdirTemp("", pattern)
}
