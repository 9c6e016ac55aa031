// Package dockerbox runs locklab's servers in containers of a local Docker
// engine, through dockertest: the engine and the labels that tie what it
// creates to this process, a bridge network per cluster, images built
// locally from the host's binaries (no registry is involved: nothing is
// pulled), containers whose first process is a shell that supervises the
// server (starts it, signals it, kills it) while the container stays up,
// and the removal of what a killed run left behind.
//
// stores/redis/redisnode's Redis containers and the etcd
// (stores/etcd/etcdproc), PostgreSQL (stores/postgres/pgproc) and ZooKeeper
// (stores/zookeeper/zkproc) containers carry the same labels, and are
// named alike: the network "locklab-<pid>-<random>-<label>", each
// container "<network>-<name>".
package dockerbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/tooling/procid"
)

// Labels on every container and network locklab creates.
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
	// LabelName is the user's label of the cluster.
	LabelName = "locklab.label"
)

// ErrNoEngine is wrapped by Connect's error when no Docker engine answers.
var ErrNoEngine = errors.New("no Docker engine answers")

// PingTimeout bounds the check that a Docker engine answers.
const PingTimeout = 2 * time.Second

// Connect connects to the engine of $DOCKER_HOST (or the default socket)
// and checks that it answers within PingTimeout.
func Connect(ctx context.Context) (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	if err := pool.Client.PingWithContext(pctx); err != nil {
		return nil, fmt.Errorf("%w at %s: %v", ErrNoEngine, pool.Client.Endpoint(), err)
	}
	return pool, nil
}

// OwnLabels are the labels that tie a resource to this process.
func OwnLabels() map[string]string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return map[string]string{
		LabelKey:      "1",
		LabelPid:      strconv.Itoa(pid),
		LabelPidStart: procid.Start(pid),
		LabelHost:     host,
	}
}

// NetworkName is a new network name: "locklab-<pid>-<8 hex digits>", then
// "-" and label when it is not empty.
func NetworkName(label string) string {
	var suffix [4]byte
	rand.Read(suffix[:])
	name := "locklab-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(suffix[:])
	if s := Sanitize(label); s != "" {
		name += "-" + s
	}
	return name
}

// Sanitize keeps what a container name allows.
func Sanitize(s string) string {
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

// Network is a bridge network of this process, and the engine it is on.
type Network struct {
	Pool *dockertest.Pool
	ID   string
	Name string
	// Labels are those of the network, which its containers carry too.
	Labels map[string]string
	// endpoints orders the starts and removals of its containers.
	endpoints Endpoints
}

// NewNetwork connects to the engine, removes what earlier runs left
// (RemoveStale, best effort) and creates a bridge network named
// NetworkName(kind), labelled with this process and, when not empty,
// label (LabelName), named NetworkName(kind) or, with a label,
// NetworkName(kind + "-" + label). Its containers get their addresses from
// the engine.
func NewNetwork(ctx context.Context, kind, label string) (*Network, error) {
	pool, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	_ = RemoveStale(ctx)
	name := NetworkName(kind)
	if label != "" {
		name = NetworkName(kind + "-" + label)
	}
	labels := OwnLabels()
	labels[LabelCluster] = name
	if label != "" {
		labels[LabelName] = label
	}
	// Not cut short by ctx: a network created after all must be removed.
	nw, err := pool.Client.CreateNetwork(dc.CreateNetworkOptions{
		Name: name, Driver: "bridge", Labels: labels, Context: context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("docker: creating network %s: %w", name, err)
	}
	n := &Network{Pool: pool, ID: nw.ID, Name: name, Labels: labels}
	if err := ctx.Err(); err != nil {
		n.Remove()
		return nil, fmt.Errorf("docker: creating network %s: %w", name, err)
	}
	return n, nil
}

// Remove removes the network; its containers must be gone (a container
// being removed may hold it for a moment).
func (n *Network) Remove() error {
	var err error
	for range 40 {
		if err = n.Pool.Client.RemoveNetwork(n.ID); err == nil || GoneOrGoing(err) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("docker: removing network %s: %w", n.Name, cmp.Or(miscounted(n.Pool.Client, n.ID, err), err))
}

// miscounted tells whether err, from removing network id, comes from the
// engine's lost count of its endpoints (see Endpoints): the engine says
// the network has active endpoints, and no container is on it. Then it
// returns err with what to do; else nil.
func miscounted(cli *dc.Client, id string, err error) error {
	if err == nil || !strings.Contains(err.Error(), "has active endpoints") {
		return nil
	}
	if info, ierr := cli.NetworkInfo(id); ierr != nil || len(info.Containers) > 0 {
		return nil
	}
	return fmt.Errorf("%w (no container is on it: the engine lost count of its endpoints, moby/moby#42119; restarting the Docker engine frees it)", err)
}

// RemoveStale removes the containers and networks that an earlier run on
// this host left behind: those labelled locklab whose owning process is gone.
// Those of live processes (such as parallel test binaries) stay. It does
// nothing when no engine answers.
func RemoveStale(ctx context.Context) error {
	pool, err := Connect(ctx)
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
	var ends Endpoints
	for _, c := range cs {
		if !stale(c.Labels) {
			continue
		}
		var nets []string
		for _, nw := range c.Networks.Networks {
			nets = append(nets, nw.NetworkID)
		}
		if err := ends.RemoveContainer(ctx, cli, c.ID, nets...); err != nil {
			errs = append(errs, fmt.Errorf("docker: removing stale container %s: %w", c.ID[:12], err))
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
			if err == nil || GoneOrGoing(err) {
				break
			}
			if m := miscounted(cli, n.ID, err); m != nil || attempt == 20 || ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("docker: removing stale network %s: %w", n.Name, cmp.Or(m, err)))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// GoneOrGoing reports whether err says the object no longer exists or is
// being removed already.
func GoneOrGoing(err error) bool {
	var nc *dc.NoSuchContainer
	var nn *dc.NoSuchNetwork
	var de *dc.Error
	return errors.As(err, &nc) || errors.As(err, &nn) ||
		(errors.As(err, &de) && (de.Status == 404 || de.Status == 409 && strings.Contains(de.Message, "already in progress")))
}

// Owned lists the names of the containers and networks labelled with
// process pid and, when label is not empty, with label (LabelName): what
// a test checks is gone after Close.
func Owned(ctx context.Context, pid int, label string) (containers, networks []string, err error) {
	pool, err := Connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	lbls := []string{LabelPid + "=" + strconv.Itoa(pid)}
	if label != "" {
		lbls = append(lbls, LabelName+"="+label)
	}
	cs, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": lbls}, Context: ctx})
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cs {
		containers = append(containers, strings.Join(c.Names, ","))
	}
	nf := dc.NetworkFilterOpts{"label": {}}
	for _, l := range lbls {
		nf["label"][l] = true
	}
	ns, err := pool.Client.FilteredListNetworks(nf)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range ns {
		networks = append(networks, n.Name)
	}
	return containers, networks, nil
}
