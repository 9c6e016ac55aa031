// A node of the docker backend: one container on the cluster's network, its
// configuration, its start and the faults done to it through the engine.

package node

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/redisproc"
)

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
