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

// Supervised containers. A restart of a container costs about a second
// (the engine tears down and sets up its process, mounts and network
// endpoint), and a docker exec some tens of milliseconds. So a container
// whose image has /bin/sh runs supervisorScript as its first process, a
// shell that starts and kills the container's redis-server as its child
// when told to on its stdin, which the harness keeps attached (see
// supervisor). A kill is a SIGKILL, waited for; a restart kills the server
// if it runs and starts a new one, in the same container at the same
// address: a new process, which finds nothing of its predecessor's memory,
// only the files it reads. A restart without data gives the new server a
// configuration of a new generation N, /data/rN.conf, whose RDB and
// append-only files are named rN.rdb and rN.aof: none of its predecessor's
// files is one it reads. With data the server starts again on the same
// configuration (rewritten by CONFIG REWRITE since) and so the same files.

// supervisorScript is the first process of a supervised container. It
// reads one command a line and answers each with one line on stdout:
//
//	write FILE   the lines that follow, up to one that is ".", become FILE
//	start CONF   start redis-server CONF
//	kill         SIGKILL the server and wait for its exit
//	alive        "yes" if the server runs, else "no"
//	partition    take the network interfaces (all but lo) down
//	heal GW      bring them up, with the default route through GW
//
// The server's output goes to the shell's stderr, which the container's log
// keeps.
const supervisorScript = `pid=
while IFS= read -r cmd; do
	case $cmd in
	"write "*)
		f=${cmd#write }
		: >"$f"
		while IFS= read -r l && [ "$l" != . ]; do printf '%s\n' "$l" >>"$f"; done
		echo ok;;
	"start "*)
		redis-server "${cmd#start }" </dev/null >&2 &
		pid=$!
		echo ok;;
	kill)
		if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null; wait "$pid"; fi
		pid=
		echo ok;;
	alive)
		st=
		[ -z "$pid" ] || read -r _ _ st _ 2>/dev/null <"/proc/$pid/stat"
		if [ -n "$st" ] && [ "$st" != Z ]; then echo yes; else echo no; fi;;
	partition|"heal "*)
		up=down
		[ "$cmd" = partition ] || up=up
		err=
		for i in /sys/class/net/*; do
			n=${i##*/}
			[ "$n" = lo ] || ip link set "$n" $up 2>/dev/null || err=1
		done
		[ -n "$err" ] || [ $up = down ] || ip route replace default via "${cmd#heal }" 2>/dev/null || err=1
		if [ -z "$err" ]; then echo ok; else echo "ip link set $up failed"; fi;;
	*)
		echo "unknown command: $cmd";;
	esac
done
`

// confPath is the configuration file of a supervised server of generation
// gen.
func confPath(gen int) string { return "/data/r" + strconv.Itoa(gen) + ".conf" }

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

// startFirst attaches to a supervised container's supervisor, which has
// just started, and starts its first server.
func (s *dockerServer) startFirst(ctx context.Context) error {
	sup, err := dockerbox.Attach(s.b.cli, s.id)
	if err != nil {
		return fmt.Errorf("docker: attaching to container %s: %w", s.container, err)
	}
	s.sup = sup
	return s.startNew(ctx)
}

// startNew starts a supervised server of a new generation: a configuration
// (from s.persistCfg) whose files no earlier server wrote.
func (s *dockerServer) startNew(ctx context.Context) error {
	s.gen++
	conf := strings.Split(strings.TrimSuffix(redisConf(s.persistCfg, s.gen)+s.extraConf, "\n"), "\n")
	if err := s.sup.OK(ctx, "write "+confPath(s.gen), conf); err != nil {
		return fmt.Errorf("docker: container %s: %w", s.container, err)
	}
	return s.startServer(ctx)
}

// startServer starts a supervised container's redis-server on the
// configuration of generation s.gen and waits until it answers. The server
// that ran before must be gone (killServer), lest its PONG be taken for the
// new one's.
func (s *dockerServer) startServer(ctx context.Context) error {
	if err := s.sup.OK(ctx, "start "+confPath(s.gen), nil); err != nil {
		return fmt.Errorf("docker: container %s: %w", s.container, err)
	}
	sup := s.sup // the check may outlive the wait, and s.sup with it
	return s.waitUp(ctx, func(ctx context.Context) bool {
		a, err := sup.Do(ctx, "alive", nil)
		return err != nil || a != "yes"
	})
}

// killServer SIGKILLs a supervised container's redis-server and waits until
// it has exited.
func (s *dockerServer) killServer(ctx context.Context) error {
	if err := s.sup.OK(ctx, "kill", nil); err != nil {
		return fmt.Errorf("docker: container %s: %w", s.container, err)
	}
	return nil
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
	gone := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done(): // Close cuts the start short
				close(gone)
				return
			case <-time.After(250 * time.Millisecond):
			}
			if exited(ctx) {
				close(gone)
				return
			}
		}
	}()
	if err := redisproc.WaitPing(s.addr(), s.b.timeout, gone); err != nil {
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

// killLocked sends SIGKILL to the server (the container's, or a supervised
// one's redis-server) and waits until it is gone.
func (s *dockerServer) killLocked(ctx context.Context) error {
	if s.paused {
		s.b.cli.UnpauseContainer(s.id)
		s.paused = false
	}
	if s.supervised {
		return s.killServer(ctx)
	}
	// The container's exit takes its endpoint off the network: alone (see
	// dockerbox.Endpoints).
	return s.b.endpoints.Remove(func() error {
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
	})
}

func (s *dockerServer) restart(ctx context.Context, keepData bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.supervised {
		if s.paused {
			s.b.cli.UnpauseContainer(s.id)
			s.paused = false
		}
		// Killed first, and waited for: the new server's PONG must not
		// come from the old one.
		if err := s.killServer(ctx); err != nil {
			return err
		}
		if !keepData {
			return s.startNew(ctx)
		}
		return s.startServer(ctx)
	}
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

// partition cuts the container off: a supervised one, not paused, takes
// its interface down (tens of microseconds, where the engine takes over a
// tenth of a second to disconnect a container from its network); else, or
// when its image has no ip command, the engine disconnects it.
func (s *dockerServer) partition(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.partitioned {
		return nil
	}
	if s.supervised && !s.paused && s.b.ipLink.Load() >= 0 {
		a, err := s.sup.Do(ctx, "partition", nil)
		if err != nil {
			return fmt.Errorf("docker: container %s: %w", s.container, err)
		}
		if a == "ok" {
			s.b.ipLink.Store(1)
			s.partitioned, s.linkDown = true, true
			return nil
		}
		// No ip command, or no right to use it: what went down comes up,
		// and the engine disconnects the container instead, from now on.
		s.b.ipLink.Store(-1)
		if err := s.sup.OK(ctx, "heal "+s.b.gateway.String(), nil); err != nil {
			return fmt.Errorf("docker: container %s: %w", s.container, err)
		}
	}
	if err := s.disconnect(ctx); err != nil {
		return err
	}
	s.partitioned = true
	return nil
}

// heal ends the partition the way it was made. A container paused since
// its interface went down is thawed for the supervisor to bring it up, and
// paused again.
func (s *dockerServer) heal(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.partitioned {
		return nil
	}
	if s.linkDown {
		if s.paused {
			if err := s.b.cli.UnpauseContainer(s.id); err != nil {
				return err
			}
			defer s.b.cli.PauseContainer(s.id)
		}
		if err := s.sup.OK(ctx, "heal "+s.b.gateway.String(), nil); err != nil {
			return fmt.Errorf("docker: container %s: %w", s.container, err)
		}
		s.partitioned, s.linkDown = false, false
		return nil
	}
	if err := s.b.endpoints.Add(func() error {
		return s.b.cli.ConnectNetwork(s.b.netID, dc.NetworkConnectionOptions{
			Container:      s.id,
			EndpointConfig: &dc.EndpointConfig{IPAMConfig: &dc.EndpointIPAMConfig{IPv4Address: s.ip}},
			Context:        ctx,
		})
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
