package node

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/procid"
	"github.com/locklab/locklab/internal/redisproc"
)

// Labels on every container and network the docker backend creates.
const (
	// LabelKey marks locklab's containers and networks (value "1").
	LabelKey = "locklab"
	// LabelPid is the pid of the process that owns them.
	LabelPid = "locklab.pid"
	// LabelPidStart is that process's start time, to tell a reused pid.
	LabelPidStart = "locklab.pidstart"
	// LabelHost is the host name of the owning process.
	LabelHost = "locklab.host"
	// LabelCluster names the cluster (its network).
	LabelCluster = "locklab.cluster"
	// LabelName is the user's Options.Label.
	LabelName = "locklab.label"
)

// errNoEngine: no Docker engine answered.
var errNoEngine = errors.New("no Docker engine answers")

// pingTimeout bounds the check that a Docker engine answers.
const pingTimeout = 2 * time.Second

// dockerBackend runs each node in a container on a private network of its
// own; clients dial the container's address on that network, so that
// disconnecting a container from it cuts every client off.
type dockerBackend struct {
	pool    *dockertest.Pool
	cli     *dc.Client
	image   resolvedImage
	netID   string
	netName string
	subnet  netip.Prefix
	gateway netip.Addr
	labels  map[string]string
	timeout time.Duration
}

// dockerClient connects to the engine of $DOCKER_HOST (or the default
// socket) and checks that it answers within pingTimeout.
func dockerClient(ctx context.Context) (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoEngine, err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := pool.Client.PingWithContext(pctx); err != nil {
		return nil, fmt.Errorf("%w at %s: %v", errNoEngine, pool.Client.Endpoint(), err)
	}
	return pool, nil
}

// ownLabels are the labels that tie a resource to this process.
func ownLabels() map[string]string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return map[string]string{
		LabelKey:      "1",
		LabelPid:      strconv.Itoa(pid),
		LabelPidStart: procid.Start(pid),
		LabelHost:     host,
	}
}

func newDocker(ctx context.Context, opts Options) (*dockerBackend, error) {
	pool, err := dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	cli := pool.Client
	// Best effort: what another run is removing at the same moment, or
	// cannot be removed yet, is left for the next start.
	_ = RemoveStale(ctx)
	img, err := ensureImage(ctx, cli, opts.Image)
	if err != nil {
		return nil, err
	}
	b := &dockerBackend{pool: pool, cli: cli, image: img, timeout: opts.StartTimeout}
	b.labels = ownLabels()
	if opts.Label != "" {
		b.labels[LabelName] = opts.Label
	}
	if err := b.createNetwork(ctx, opts.Label); err != nil {
		return nil, err
	}
	return b, nil
}

// createNetwork creates the cluster's bridge network. Docker allocates a
// subnet that does not clash with the host's; the network is then created
// again with that subnet spelled out, because only such networks let a
// container keep a fixed address across restarts and partitions.
func (b *dockerBackend) createNetwork(ctx context.Context, label string) error {
	var suffix [4]byte
	rand.Read(suffix[:])
	name := "locklab-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(suffix[:])
	if s := sanitize(label); s != "" {
		name += "-" + s
	}
	labels := map[string]string{LabelCluster: name}
	for k, v := range b.labels {
		labels[k] = v
	}
	// A create cut short by ctx may still have created the network: the
	// calls run to the end, and ctx is checked between them.
	bg := context.WithoutCancel(ctx)
	var lastErr error
	for attempt := 0; attempt < 8; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("docker: creating network %s: %w", name, err)
		}
		probe, err := b.cli.CreateNetwork(dc.CreateNetworkOptions{
			Name: name, Driver: "bridge", Labels: labels, Context: bg,
		})
		if err != nil {
			return fmt.Errorf("docker: creating network %s: %w", name, err)
		}
		info, err := b.cli.NetworkInfo(probe.ID)
		b.cli.RemoveNetwork(probe.ID)
		if err != nil {
			return fmt.Errorf("docker: inspecting network %s: %w", name, err)
		}
		var subnet, gw string
		for _, c := range info.IPAM.Config {
			if p, err := netip.ParsePrefix(c.Subnet); err == nil && p.Addr().Is4() {
				subnet, gw = c.Subnet, c.Gateway
				break
			}
		}
		if subnet == "" {
			return fmt.Errorf("docker: network %s got no IPv4 subnet", name)
		}
		prefix, _ := netip.ParsePrefix(subnet)
		gateway, err := netip.ParseAddr(gw)
		if err != nil {
			gateway = prefix.Masked().Addr().Next()
			gw = gateway.String()
		}
		nw, err := b.cli.CreateNetwork(dc.CreateNetworkOptions{
			Name: name, Driver: "bridge", Labels: labels, Context: bg,
			IPAM: &dc.IPAMOptions{Driver: "default", Config: []dc.IPAMConfig{{Subnet: subnet, Gateway: gw}}},
		})
		if err != nil {
			// Another run took the subnet in between: try again.
			lastErr = err
			time.Sleep(time.Duration(20*(attempt+1)) * time.Millisecond)
			continue
		}
		if err := ctx.Err(); err != nil {
			b.cli.RemoveNetwork(nw.ID)
			return fmt.Errorf("docker: creating network %s: %w", name, err)
		}
		b.netID, b.netName, b.subnet, b.gateway = nw.ID, name, prefix.Masked(), gateway
		return nil
	}
	return fmt.Errorf("docker: creating network %s: %w", name, lastErr)
}

// sanitize keeps what a container name allows.
func sanitize(s string) string {
	var out []rune
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			out = append(out, r)
		default:
			out = append(out, '-')
		}
	}
	if len(out) > 40 {
		out = out[:40]
	}
	return strings.Trim(string(out), "-.")
}

func (b *dockerBackend) name() string { return BackendDocker }

func (b *dockerBackend) describe() string {
	if b.image.built {
		return "docker image " + b.image.name + " (built from " + b.image.from + ")"
	}
	return "docker image " + b.image.name
}

// ipFor returns the fixed address of node idx: the gateway's neighbours are
// left alone and nodes start at the tenth address.
func (b *dockerBackend) ipFor(idx int) (netip.Addr, error) {
	a := b.subnet.Addr()
	for i := 0; i < 10+idx; i++ {
		a = a.Next()
	}
	if !b.subnet.Contains(a) || a == b.gateway {
		return netip.Addr{}, fmt.Errorf("docker: subnet %v too small for node %d", b.subnet, idx+1)
	}
	return a, nil
}

func (b *dockerBackend) start(ctx context.Context, idx int, name string, p persistence) (server, error) {
	ip, err := b.ipFor(idx)
	if err != nil {
		return nil, err
	}
	s := &dockerServer{
		b:          b,
		node:       name,
		container:  b.netName + "-" + name,
		ip:         ip.String(),
		persistCfg: p,
	}
	return s.launch(ctx)
}

// startSentinel runs a container whose server is a Sentinel on port 6379
// with the directives conf, in /data/sentinel.conf, which it rewrites as it
// learns the group.
func (b *dockerBackend) startSentinel(ctx context.Context, idx int, name, conf string) (server, error) {
	ip, err := b.ipFor(idx)
	if err != nil {
		return nil, err
	}
	s := &dockerServer{
		b:         b,
		node:      name,
		container: b.netName + "-" + name,
		ip:        ip.String(),
		sentinel:  "port 6379\nbind 0.0.0.0\nprotected-mode no\ndir /data\n" + conf,
	}
	return s.launch(ctx)
}

// launch creates s's container and starts it, waiting until it answers;
// on failure it removes what it made.
func (s *dockerServer) launch(ctx context.Context) (server, error) {
	if err := s.create(ctx); err != nil {
		s.close()
		return nil, fmt.Errorf("node %s: %w", s.node, err)
	}
	if err := s.startAndWait(ctx); err != nil {
		s.close()
		return nil, fmt.Errorf("node %s: %w", s.node, err)
	}
	return s, nil
}

// close removes the cluster's network; its containers are gone by then.
func (b *dockerBackend) close() error {
	var err error
	for i := 0; i < 20; i++ {
		if err = b.cli.RemoveNetwork(b.netID); err == nil {
			return nil
		}
		var nf *dc.NoSuchNetwork
		if errors.As(err, &nf) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("docker: removing network %s: %w", b.netName, err)
}

// dockerServer is one container.
type dockerServer struct {
	b         *dockerBackend
	node      string
	container string
	ip        string
	// sentinel, when not empty, is the configuration of a Sentinel: the
	// container runs redis-server --sentinel on it.
	sentinel string

	mu          sync.Mutex
	id          string
	persistCfg  persistence
	partitioned bool
	paused      bool
}

// redisConf is the configuration file the container's server reads.
func redisConf(p persistence) string {
	ao := "no"
	if p.appendOnly {
		ao = "yes"
	}
	fsync := p.fsync
	if fsync == "" {
		fsync = "everysec"
	}
	return "port 6379\nbind 0.0.0.0\nprotected-mode no\ndir /data\nsave \"\"\n" +
		"appendonly " + ao + "\nappendfsync " + fsync + "\n"
}

// create makes the container (not started) with its configuration file.
func (s *dockerServer) create(ctx context.Context) error {
	labels := map[string]string{LabelCluster: s.b.netName}
	for k, v := range s.b.labels {
		labels[k] = v
	}
	cmd := []string{"redis-server", "/data/redis.conf"}
	confName, conf := "redis.conf", []byte(redisConf(s.persistCfg))
	if s.sentinel != "" {
		cmd = []string{"redis-server", "/data/sentinel.conf", "--sentinel"}
		confName, conf = "sentinel.conf", []byte(s.sentinel)
	}
	c, err := s.b.cli.CreateContainer(dc.CreateContainerOptions{
		Name: s.container,
		Config: &dc.Config{
			Image:    s.b.image.name,
			Cmd:      cmd,
			Labels:   labels,
			Hostname: s.node,
		},
		HostConfig: &dc.HostConfig{NetworkMode: s.b.netName},
		NetworkingConfig: &dc.NetworkingConfig{EndpointsConfig: map[string]*dc.EndpointConfig{
			s.b.netName: {IPAMConfig: &dc.EndpointIPAMConfig{IPv4Address: s.ip}},
		}},
		// Not cut short by ctx: a container created after all must get
		// its id recorded, for close to remove it.
		Context: context.WithoutCancel(ctx),
	})
	if err != nil {
		return fmt.Errorf("docker: creating container %s: %w", s.container, err)
	}
	s.id = c.ID
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker: creating container %s: %w", s.container, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: confName, Mode: 0o666, Size: int64(len(conf)), ModTime: time.Now()})
	tw.Write(conf)
	tw.Close()
	if err := s.b.cli.UploadToContainer(s.id, dc.UploadToContainerOptions{
		InputStream: &buf, Path: "/data", Context: ctx,
	}); err != nil {
		return fmt.Errorf("docker: writing %s into %s: %w", confName, s.container, err)
	}
	if s.partitioned {
		if err := s.b.cli.DisconnectNetwork(s.b.netID, dc.NetworkConnectionOptions{Container: s.id, Force: true, Context: ctx}); err != nil {
			return fmt.Errorf("docker: disconnecting %s: %w", s.container, err)
		}
	}
	return nil
}

// startAndWait starts the container and waits for PING (unless partitioned,
// when nothing can reach it).
func (s *dockerServer) startAndWait(ctx context.Context) error {
	if err := s.b.cli.StartContainerWithContext(s.id, nil, ctx); err != nil {
		return fmt.Errorf("docker: starting container %s: %w", s.container, err)
	}
	if s.partitioned {
		return nil
	}
	exited := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done(): // Close cuts the start short
				close(exited)
				return
			case <-time.After(250 * time.Millisecond):
			}
			c, err := s.b.cli.InspectContainerWithContext(s.id, ctx)
			if err == nil && c.State.Status == "exited" {
				close(exited)
				return
			}
		}
	}()
	if err := redisproc.WaitPing(s.addr(), s.b.timeout, exited); err != nil {
		return fmt.Errorf("redis in container %s at %s did not come up: %w\n%s", s.container, s.addr(), err, s.logTailOf(s.id, 15))
	}
	return nil
}

func (s *dockerServer) addr() string     { return net.JoinHostPort(s.ip, "6379") }
func (s *dockerServer) peerAddr() string { return s.addr() }

func (s *dockerServer) pause(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.b.cli.PauseContainer(s.id); err != nil {
		return err
	}
	s.paused = true
	return nil
}

func (s *dockerServer) resume(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.b.cli.UnpauseContainer(s.id); err != nil {
		return err
	}
	s.paused = false
	return nil
}

func (s *dockerServer) kill(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked(ctx)
}

// killLocked sends SIGKILL and waits until the engine sees the container
// stopped.
func (s *dockerServer) killLocked(ctx context.Context) error {
	if s.paused {
		s.b.cli.UnpauseContainer(s.id)
		s.paused = false
	}
	if err := s.b.cli.KillContainer(dc.KillContainerOptions{ID: s.id, Signal: dc.SIGKILL, Context: ctx}); err != nil {
		var nr *dc.ContainerNotRunning
		if errors.As(err, &nr) {
			return nil
		}
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.b.cli.WaitContainerWithContext(s.id, wctx)
	return err
}

func (s *dockerServer) restart(ctx context.Context, keepData bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if keepData {
		if err := s.killLocked(ctx); err != nil {
			return err
		}
		return s.startAndWait(ctx)
	}
	// A new container at the same address: no file of the old one survives.
	if err := s.removeLocked(ctx); err != nil {
		return err
	}
	if err := s.create(ctx); err != nil {
		return err
	}
	return s.startAndWait(ctx)
}

func (s *dockerServer) partition(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.partitioned {
		return nil
	}
	if err := s.b.cli.DisconnectNetwork(s.b.netID, dc.NetworkConnectionOptions{Container: s.id, Force: true, Context: ctx}); err != nil {
		return err
	}
	s.partitioned = true
	return nil
}

func (s *dockerServer) heal(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.partitioned {
		return nil
	}
	if err := s.b.cli.ConnectNetwork(s.b.netID, dc.NetworkConnectionOptions{
		Container:      s.id,
		EndpointConfig: &dc.EndpointConfig{IPAMConfig: &dc.EndpointIPAMConfig{IPv4Address: s.ip}},
		Context:        ctx,
	}); err != nil {
		return err
	}
	s.partitioned = false
	return nil
}

// persist rewrites the container's configuration file (CONFIG REWRITE) so
// that a restart keeping data keeps the setting; a restart without data
// writes a new file from p.
func (s *dockerServer) persist(ctx context.Context, c redis.Conn, p persistence) error {
	if _, err := redis.DoContext(c, ctx, "CONFIG", "REWRITE"); err != nil {
		return fmt.Errorf("CONFIG REWRITE: %w", err)
	}
	s.mu.Lock()
	s.persistCfg = p
	s.mu.Unlock()
	return nil
}

func (s *dockerServer) logTail(n int) string {
	s.mu.Lock()
	id := s.id
	s.mu.Unlock()
	return s.logTailOf(id, n)
}

// logTailOf returns the last n lines of container id's output.
func (s *dockerServer) logTailOf(id string, n int) string {
	if id == "" {
		return "(no container)"
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.b.cli.Logs(dc.LogsOptions{
		Context: ctx, Container: id, OutputStream: &out, ErrorStream: &out,
		Stdout: true, Stderr: true, Tail: strconv.Itoa(n),
	})
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return strings.TrimRight(out.String(), "\n")
}

func (s *dockerServer) removeLocked(ctx context.Context) error {
	if s.id == "" {
		return nil
	}
	if s.paused {
		s.b.cli.UnpauseContainer(s.id)
	}
	err := s.b.cli.RemoveContainer(dc.RemoveContainerOptions{ID: s.id, Force: true, RemoveVolumes: true, Context: ctx})
	var nf *dc.NoSuchContainer
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("docker: removing container %s: %w", s.container, err)
	}
	s.id = ""
	s.paused = false
	return nil
}

func (s *dockerServer) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(context.Background())
}

// RemoveStale removes the containers and networks that an earlier run on
// this host left behind: those labelled locklab whose owning process is gone.
// Those of live processes (such as parallel test binaries) stay. Start calls
// it on the docker backend; it does nothing when no engine answers.
func RemoveStale(ctx context.Context) error {
	pool, err := dockerClient(ctx)
	if err != nil {
		return nil
	}
	cli := pool.Client
	host, _ := os.Hostname()
	filter := map[string][]string{"label": {LabelKey + "=1", LabelHost + "=" + host}}
	stale := func(labels map[string]string) bool {
		pid, err := strconv.Atoi(labels[LabelPid])
		if err != nil {
			return false
		}
		return !procid.Alive(pid, labels[LabelPidStart])
	}
	cs, err := cli.ListContainers(dc.ListContainersOptions{All: true, Filters: filter, Context: ctx})
	if err != nil {
		return fmt.Errorf("docker: listing containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		if stale(c.Labels) {
			err := cli.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true, Context: ctx})
			if err != nil && !goneOrGoing(err) {
				errs = append(errs, fmt.Errorf("docker: removing stale container %s: %w", c.ID[:12], err))
			}
		}
	}
	nws, err := cli.FilteredListNetworks(dc.NetworkFilterOpts{"label": {LabelKey + "=1": true, LabelHost + "=" + host: true}})
	if err != nil {
		return fmt.Errorf("docker: listing networks: %w", err)
	}
	for _, n := range nws {
		if !stale(n.Labels) {
			continue
		}
		// Its containers may still be on their way out (removed by another
		// run at the same moment): give them a moment.
		for attempt := 0; ; attempt++ {
			err := cli.RemoveNetwork(n.ID)
			if err == nil || goneOrGoing(err) {
				break
			}
			if attempt == 20 || ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("docker: removing stale network %s: %w", n.Name, err))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// goneOrGoing reports whether err says the object no longer exists or is
// being removed already.
func goneOrGoing(err error) bool {
	var nc *dc.NoSuchContainer
	var nn *dc.NoSuchNetwork
	var de *dc.Error
	return errors.As(err, &nc) || errors.As(err, &nn) ||
		(errors.As(err, &de) && (de.Status == 404 || de.Status == 409 && strings.Contains(de.Message, "already in progress")))
}
