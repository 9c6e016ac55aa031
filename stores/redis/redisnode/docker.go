// The docker backend: the engine it talks to, the labels that tie what it
// creates to this process, and the private network of each cluster with a
// fixed address per node.

package redisnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/rcluster"
)

// Labels on every container and network the docker backend creates.
const (
	// LabelKey marks locklab's containers and networks (value "1").
	LabelKey = dockerbox.LabelKey
	// LabelPid is the pid of the process that owns them.
	LabelPid = dockerbox.LabelPid
	// LabelPidStart is that process's start time, to tell a reused pid.
	LabelPidStart = dockerbox.LabelPidStart
	// LabelHost is the host name of the owning process.
	LabelHost = dockerbox.LabelHost
	// LabelCluster names the cluster (its network).
	LabelCluster = dockerbox.LabelCluster
	// LabelName is the user's Options.Label.
	LabelName = dockerbox.LabelName
)

// errNoEngine: no Docker engine answered.
var errNoEngine = dockerbox.ErrNoEngine

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
	// shell tells whether the image has /bin/sh, for supervised
	// containers (see dockerServer): 1 yes, -1 no, 0 not known yet (the
	// first container tries).
	shell atomic.Int32
	// ipLink tells whether a supervised container can take its interface
	// down for a partition: 1 yes, -1 no (the engine disconnects it), 0
	// not known yet.
	ipLink atomic.Int32
	// endpoints orders the calls that add containers to the network and
	// those that take them off it (see dockerbox.Endpoints).
	endpoints dockerbox.Endpoints
}

// dockerClient connects to the engine of $DOCKER_HOST (or the default
// socket) and checks that it answers within dockerbox.PingTimeout.
func dockerClient(ctx context.Context) (*dockertest.Pool, error) { return dockerbox.Connect(ctx) }

// ownLabels are the labels that tie a resource to this process.
func ownLabels() map[string]string { return dockerbox.OwnLabels() }

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
	switch {
	case img.built && img.noShell:
		b.shell.Store(-1)
	case img.built:
		b.shell.Store(1)
	}
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
func sanitize(s string) string { return dockerbox.Sanitize(s) }

func (b *dockerBackend) name() string { return backends.Docker }

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

// startClusterNode runs a container whose server is a cluster node on port
// 6379 (bus 16379) of its fixed address on the cluster's network, which it
// announces: the host's clients dial that address, as they dial every
// node of the docker backend, and so do the other nodes.
func (b *dockerBackend) startClusterNode(ctx context.Context, idx int, name string, p persistence, nodeTimeout time.Duration) (server, int, error) {
	ip, err := b.ipFor(idx)
	if err != nil {
		return nil, 0, err
	}
	var conf strings.Builder
	for _, d := range rcluster.Directives(nodeTimeout) {
		conf.WriteString(d[0] + " " + d[1] + "\n")
	}
	conf.WriteString("cluster-announce-ip " + ip.String() + "\n")
	s := &dockerServer{
		b:          b,
		node:       name,
		container:  b.netName + "-" + name,
		ip:         ip.String(),
		persistCfg: p,
		extraConf:  conf.String(),
	}
	srv, err := s.launch(ctx)
	return srv, 0, err
}

// close removes the cluster's network; its containers are gone by then.
func (b *dockerBackend) close() error {
	return (&dockerbox.Network{Pool: b.pool, ID: b.netID, Name: b.netName}).Remove()
}
