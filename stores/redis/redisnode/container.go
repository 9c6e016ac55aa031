// A node of the docker backend: one container on the cluster's network, its
// configuration, its start, its log and its removal. The faults done to it
// are in container_faults.go, its supervisor in container_supervisor.go.

package redisnode

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
	"github.com/locklab/locklab/internal/tooling/redisproc"
)

// launch creates s's container and starts it, waiting until its server
// answers; on failure it removes what it made. A container meant to be
// supervised whose image turns out to have no /bin/sh is made again with
// redis-server as its first process, and so are the cluster's later ones.
func (s *dockerServer) launch(ctx context.Context) (server, error) {
	s.supervised = s.sentinel == "" && s.b.shell.Load() >= 0
	err := s.create(ctx)
	if err == nil {
		err = s.startContainer(ctx)
		if err != nil && s.supervised && strings.Contains(err.Error(), `"/bin/sh"`) {
			s.b.shell.Store(-1)
			s.removeLocked(ctx)
			s.supervised = false
			if err = s.create(ctx); err == nil {
				err = s.startContainer(ctx)
			}
		}
	}
	if err == nil {
		if s.supervised {
			s.b.shell.Store(1)
			err = s.startFirst(ctx)
		} else {
			err = s.waitUp(ctx, s.containerExited)
		}
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("node %s: %w", s.node, err)
	}
	return s, nil
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
	// extraConf are more lines of a data node's configuration file (a
	// cluster node's directives).
	extraConf string

	mu          sync.Mutex
	id          string
	persistCfg  persistence
	partitioned bool
	// linkDown: the partition took the container's interface down (rather
	// than disconnecting it from the network).
	linkDown bool
	paused   bool
	// supervised: the container's first process is supervisorScript,
	// reached through sup, and its redis-server runs on the configuration
	// of generation gen. Otherwise redis-server is the container's first
	// process, and restarting it restarts the container.
	supervised bool
	sup        *dockerbox.Supervisor
	gen        int
}

// redisConf is the configuration file the container's server reads. A
// supervised server of generation gen (> 0) names its RDB and append-only
// files after it.
func redisConf(p persistence, gen int) string {
	ao := "no"
	if p.appendOnly {
		ao = "yes"
	}
	fsync := p.fsync
	if fsync == "" {
		fsync = "everysec"
	}
	conf := "port 6379\nbind 0.0.0.0\nprotected-mode no\ndir /data\nsave \"\"\n" +
		"appendonly " + ao + "\nappendfsync " + fsync + "\n"
	if gen > 0 {
		g := "r" + strconv.Itoa(gen)
		conf += "dbfilename " + g + ".rdb\nappendfilename " + g + ".aof\n"
	}
	return conf
}

// create makes the container (not started) with its configuration file.
func (s *dockerServer) create(ctx context.Context) error {
	labels := map[string]string{LabelCluster: s.b.netName}
	for k, v := range s.b.labels {
		labels[k] = v
	}
	cfg := &dc.Config{
		Image:    s.b.image.name,
		Cmd:      []string{"redis-server", "/data/redis.conf"},
		Labels:   labels,
		Hostname: s.node,
	}
	switch {
	case s.sentinel != "":
		cfg.Cmd = []string{"redis-server", "/data/sentinel.conf", "--sentinel"}
	case s.supervised:
		// The image's entrypoint (the official image's switches user) is
		// left out.
		cfg.Entrypoint = []string{"/bin/sh", "-c"}
		cfg.Cmd = []string{supervisorScript}
		cfg.OpenStdin = true
	}
	host := &dc.HostConfig{NetworkMode: s.b.netName}
	if s.supervised {
		// For ip link set, which partitions the container.
		host.CapAdd = []string{"NET_ADMIN"}
	}
	c, err := s.b.cli.CreateContainer(dc.CreateContainerOptions{
		Name:       s.container,
		Config:     cfg,
		HostConfig: host,
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
	if !s.supervised {
		if err := s.uploadConf(ctx); err != nil {
			return err
		}
	}
	if s.partitioned {
		if err := s.disconnect(ctx); err != nil {
			return fmt.Errorf("docker: disconnecting %s: %w", s.container, err)
		}
	}
	return nil
}

// uploadConf writes the configuration file into the container:
// /data/redis.conf or /data/sentinel.conf.
func (s *dockerServer) uploadConf(ctx context.Context) error {
	name, conf := "redis.conf", redisConf(s.persistCfg, 0)+s.extraConf
	if s.sentinel != "" {
		name, conf = "sentinel.conf", s.sentinel
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o666, Size: int64(len(conf)), ModTime: time.Now()})
	tw.Write([]byte(conf))
	tw.Close()
	if err := s.b.cli.UploadToContainer(s.id, dc.UploadToContainerOptions{
		InputStream: &buf, Path: "/data", Context: ctx,
	}); err != nil {
		return fmt.Errorf("docker: writing %s into %s: %w", name, s.container, err)
	}
	return nil
}

// startContainer starts the container.
func (s *dockerServer) startContainer(ctx context.Context) error {
	if err := s.b.endpoints.Add(func() error { return s.b.cli.StartContainerWithContext(s.id, nil, ctx) }); err != nil {
		return fmt.Errorf("docker: starting container %s: %w", s.container, err)
	}
	return nil
}

// disconnect takes the container off the network, alone (see
// dockerbox.Endpoints).
func (s *dockerServer) disconnect(ctx context.Context) error {
	return s.b.endpoints.Remove(func() error {
		return s.b.cli.DisconnectNetwork(s.b.netID, dc.NetworkConnectionOptions{Container: s.id, Force: true, Context: ctx})
	})
}

// startAndWait starts the container and waits for PING.
func (s *dockerServer) startAndWait(ctx context.Context) error {
	if err := s.startContainer(ctx); err != nil {
		return err
	}
	return s.waitUp(ctx, s.containerExited)
}

// containerExited reports whether the container has stopped.
func (s *dockerServer) containerExited(ctx context.Context) bool {
	c, err := s.b.cli.InspectContainerWithContext(s.id, ctx)
	return err == nil && c.State.Status == "exited"
}

// waitUp waits for PING (unless partitioned, when nothing can reach the
// server); exited, asked every 250ms, tells that the server is gone.
func (s *dockerServer) waitUp(ctx context.Context, exited func(context.Context) bool) error {
	if s.partitioned {
		return nil
	}
	gone, stop := dockerbox.Watch(ctx, 250*time.Millisecond, exited) // ctx: Close cuts the start short
	defer stop()
	if err := redisproc.WaitPing(s.addr(), s.b.timeout, gone); err != nil {
		return fmt.Errorf("redis in container %s at %s did not come up: %w\n%s", s.container, s.addr(), err, s.logTailOf(s.id, 15))
	}
	return nil
}

func (s *dockerServer) addr() string     { return net.JoinHostPort(s.ip, "6379") }
func (s *dockerServer) peerAddr() string { return s.addr() }

func (s *dockerServer) logTail(n int) string {
	s.mu.Lock()
	id := s.id
	s.mu.Unlock()
	return s.logTailOf(id, n)
}

// logTailOf returns the last n lines of container id's output: of a
// supervised one, its stderr, where its servers write (its stdout holds
// the supervisor's answers).
func (s *dockerServer) logTailOf(id string, n int) string {
	if id == "" {
		return "(no container)"
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.b.cli.Logs(dc.LogsOptions{
		Context: ctx, Container: id, OutputStream: &out, ErrorStream: &out,
		Stdout: !s.supervised, Stderr: true, Tail: strconv.Itoa(n),
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
	if err := s.b.endpoints.RemoveContainer(ctx, s.b.cli, s.id, s.b.netID); err != nil {
		return fmt.Errorf("docker: removing container %s: %w", s.container, err)
	}
	s.id = ""
	s.paused = false
	if s.sup != nil {
		s.sup.Close()
		s.sup = nil
	}
	return nil
}

func (s *dockerServer) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(context.Background())
}
