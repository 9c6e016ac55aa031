// The docker backend: each member in a container of its own, on a network
// of the cluster's own, from an image built locally from the host's etcd
// (dockerbox: nothing is pulled). A container's first process is the
// dockerbox supervisor, which starts, signals and kills the member's etcd
// while the container stays up at the same address: a kill is a SIGKILL of
// the etcd process, a restart a new etcd process on the same data
// directory (/data, in memory, kept while the container lives), a pause a
// SIGSTOP. Clients and peers reach each member at its container's address
// on the network (http://<address>:2379, peers :2380); a partition is cut
// through a proxy in front of that address (internal/tooling/tcpproxy), as on the
// process backend.

package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/internal/tooling/cleanup"
	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// ImageRepo is the repository of the images built from the host's etcd;
// the tag is its version and the layout's revision, e.g.
// "locklab/etcd:3.4.23-1".
const ImageRepo = "locklab/etcd"

// imageRevision names the layout of the image; it changes when its
// contents do.
const imageRevision = "1"

// startDocker starts a cluster of opts.Members containers.
func startDocker(ctx context.Context, bin string, opts Options) (_ *Cluster, err error) {
	nw, err := dockerbox.NewNetwork(ctx, "etcd", opts.Label)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Bin: bin, Token: nw.Name, opts: opts, net: nw}
	cleanup.Track(c)
	defer func() {
		if err != nil {
			c.Close()
			c.closeDocker() // what was made after a Close on a signal
		}
	}()
	tag := ImageRepo + ":" + Version(bin) + "-" + imageRevision
	if err := dockerbox.Ensure(ctx, nw.Pool.Client, dockerbox.Image{
		Tag:    tag,
		Files:  map[string]string{"/usr/local/bin/etcd": bin},
		Labels: map[string]string{"locklab.from": bin},
	}); err != nil {
		return nil, err
	}
	for i := range opts.Members {
		name := "m" + strconv.Itoa(i)
		m := &Member{Name: name, Index: i, c: c, DataDir: filepath.Join("/data", name+".etcd")}
		m.What, m.Timeout = "etcdproc: member "+name, opts.StartTimeout
		c.members = append(c.members, m)
	}
	// The containers come up side by side: each costs the engine a few
	// tenths of a second.
	var wg sync.WaitGroup
	errs := make([]error, len(c.members))
	for i, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			box, err := nw.Run(ctx, dockerbox.Spec{Name: m.Name, Image: tag,
				Tmpfs: map[string]string{"/data": "rw,mode=0700"}})
			if err != nil {
				errs[i] = err
				return
			}
			m.SetBox(box)
			if c.closed.Load() { // Close ran meanwhile: it may not have seen box
				box.Remove()
				errs[i] = errors.New("etcdproc: cluster closed")
				return
			}
			m.ClientURL = "http://" + box.IP + ":2379"
			m.PeerURL = "http://" + box.IP + ":2380"
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, m := range c.members {
		if m.client, err = clientv3.New(ClientConfig(m.ClientURL)); err != nil {
			return nil, err
		}
	}
	cluster := c.initialCluster()
	for _, m := range c.members {
		if err := m.launch(cluster); err != nil {
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := c.waitHealthy(wctx, c.members); err != nil {
		return nil, err
	}
	if err := c.identify(wctx); err != nil {
		return nil, err
	}
	return c, nil
}

// closeDocker removes the containers and the network.
func (c *Cluster) closeDocker() error {
	var ps []*serverproc.Proc
	for _, m := range c.members {
		ps = append(ps, &m.Proc)
	}
	return errors.Join(serverproc.RemoveBoxes(ps...), c.net.Remove())
}

// Backend names the backend the cluster runs on.
func (c *Cluster) Backend() string {
	if c.net != nil {
		return BackendDocker
	}
	return BackendProcess
}

// Describe tells what runs the members: "3 member processes
// http://127.0.0.1:p1,... (etcd 3.4.23)" or "3 containers ... ".
func (c *Cluster) Describe() string {
	what := "member processes"
	switch {
	case c.net != nil && len(c.members) == 1:
		what = "container (network " + c.net.Name + ")"
	case c.net != nil:
		what = "containers (network " + c.net.Name + ")"
	case len(c.members) == 1:
		what = "member process"
	}
	return fmt.Sprintf("%d %s %s (%s)", len(c.members), what, strings.Join(c.Endpoints(), ","), Version(c.Bin))
}
