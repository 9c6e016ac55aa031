// The faults of a Sentinel group: pause, kill and restart the master the
// Sentinels name, and a failover of their own.

package redisnode

import (
	"context"
	"errors"

	"github.com/locklab/locklab/harness/fault"
)

// Pause freezes the master the Sentinels name; Resume thaws that node,
// whatever it has become since.
func (g *SentinelGroup) Pause(ctx context.Context) error {
	m, err := g.Master(ctx)
	if err != nil {
		return err
	}
	if err := m.Pause(ctx); err != nil {
		return err
	}
	g.mu.Lock()
	g.paused = m
	g.mu.Unlock()
	return nil
}

// Resume thaws the node Pause froze.
func (g *SentinelGroup) Resume(ctx context.Context) error {
	g.mu.Lock()
	m := g.paused
	g.paused = nil
	g.mu.Unlock()
	if m == nil {
		return errors.New("node: Resume of a Sentinel group that Pause did not freeze")
	}
	return m.Resume(ctx)
}

// Kill stops the master the Sentinels name; Restart starts that node
// again.
func (g *SentinelGroup) Kill(ctx context.Context) error {
	m, err := g.Master(ctx)
	if err != nil {
		return err
	}
	if err := m.Kill(ctx); err != nil {
		return err
	}
	g.mu.Lock()
	g.killed = m
	g.mu.Unlock()
	return nil
}

// Restart starts the node Kill stopped again (or, with none stopped,
// restarts the master the Sentinels name). Back as a master of nobody, it
// is made a replica of the current master by the Sentinels in time.
func (g *SentinelGroup) Restart(ctx context.Context, keepData bool) error {
	g.mu.Lock()
	m := g.killed
	g.killed = nil
	g.mu.Unlock()
	if m == nil {
		var err error
		if m, err = g.Master(ctx); err != nil {
			return err
		}
	}
	return m.Restart(ctx, keepData)
}

// Failover lets the Sentinels do a failover: it kills the master they
// name, waits until they have promoted a replica (bounded by ctx), then
// starts the old master again with its files, for the Sentinels to turn
// into a replica of the new one.
func (g *SentinelGroup) Failover(ctx context.Context) error {
	m, err := g.Master(ctx)
	if err != nil {
		return err
	}
	if err := m.Kill(ctx); err != nil {
		return err
	}
	if _, err := g.WaitFailover(ctx, m); err != nil {
		return err
	}
	return m.Restart(ctx, true)
}

var (
	_ fault.Pauser      = (*SentinelGroup)(nil)
	_ fault.Killer      = (*SentinelGroup)(nil)
	_ fault.Restarter   = (*SentinelGroup)(nil)
	_ fault.FailingOver = (*SentinelGroup)(nil)
)
