// The faults of a docker node: pause, kill, restart and partition done to
// its container through the engine or its supervisor.

package redisnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"
	dc "github.com/ory/dockertest/v3/docker"
)

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
