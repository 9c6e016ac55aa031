// The faults of a replicated cluster that is one node of the harness (an
// etcd cluster, a ZooKeeper ensemble): each strikes the member that leads
// when it begins.

package fault

import (
	"context"
	"fmt"
	"sync"
)

// Member is a server of a replicated cluster.
type Member interface {
	comparable
	// Kill kills the member (SIGKILL).
	Kill()
	// Restart starts it again on its data directory.
	Restart(ctx context.Context) error
	// Running reports whether its process runs.
	Running() bool
	// Stop stops it (SIGSTOP), Cont continues it (SIGCONT).
	Stop() error
	Cont() error
	// String names it.
	String() string
}

// Quorum is what AtLeader asks of a replicated cluster.
type Quorum[M Member] interface {
	// Leader waits for the member that leads, and returns it.
	Leader(ctx context.Context) (M, error)
	// WaitHealthy waits until a quorum serves, with one leader.
	WaitHealthy(ctx context.Context) error
}

// AtLeader strikes a cluster's faults at its leader: Kill kills it (the
// others elect a new one), Restart starts the member the last Kill struck
// again (or kills and restarts the leader) on its data directory, Failover
// kills it for the rest of the run and waits for the new leader, Recover
// starts the member a Failover killed again, Pause stops the leader until
// Resume. It implements Killer, Restarter, FailingOver and Pauser for the
// node that embeds it (NewAtLeader).
type AtLeader[M Member] struct {
	Quorum Quorum[M]

	mu     sync.Mutex
	struck M // the member the last fault struck
}

// NewAtLeader returns the faults of cluster q, struck at its leader.
func NewAtLeader[M Member](q Quorum[M]) *AtLeader[M] { return &AtLeader[M]{Quorum: q} }

func (f *AtLeader[M]) leader(ctx context.Context) (M, error) {
	m, err := f.Quorum.Leader(ctx)
	if err != nil {
		return m, err
	}
	f.mu.Lock()
	f.struck = m
	f.mu.Unlock()
	return m, nil
}

// last returns the member the last fault struck, ok false when none did.
func (f *AtLeader[M]) last() (m M, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var none M
	return f.struck, f.struck != none
}

// Kill kills the leader (SIGKILL).
func (f *AtLeader[M]) Kill(ctx context.Context) error {
	m, err := f.leader(ctx)
	if err != nil {
		return err
	}
	m.Kill()
	return nil
}

// Restart starts the member the last Kill struck again, or kills the
// leader and starts it again, on its data directory.
func (f *AtLeader[M]) Restart(ctx context.Context, _ bool) error {
	m, ok := f.last()
	if !ok || m.Running() {
		var err error
		if m, err = f.leader(ctx); err != nil {
			return err
		}
	}
	if err := m.Restart(ctx); err != nil {
		return err
	}
	return f.Quorum.WaitHealthy(ctx)
}

// Failover kills the leader (SIGKILL) and waits until the others have
// elected a new one. The killed member stays down for the rest of the
// run; the next run's store starts it again (Recover).
func (f *AtLeader[M]) Failover(ctx context.Context) error {
	m, err := f.leader(ctx)
	if err != nil {
		return err
	}
	m.Kill()
	if _, err := f.Quorum.Leader(ctx); err != nil {
		return fmt.Errorf("after killing the leader %s: %w", m, err)
	}
	return nil
}

// Recover starts again, on its data directory, the member a Failover
// killed, and waits for the cluster to be healthy: the next run starts on
// a whole cluster, as the first did.
func (f *AtLeader[M]) Recover(ctx context.Context) error {
	m, ok := f.last()
	if !ok || m.Running() {
		return nil
	}
	if err := m.Restart(ctx); err != nil {
		return err
	}
	return f.Quorum.WaitHealthy(ctx)
}

// Pause stops the leader (SIGSTOP).
func (f *AtLeader[M]) Pause(ctx context.Context) error {
	m, err := f.leader(ctx)
	if err != nil {
		return err
	}
	return m.Stop()
}

// Resume continues the member Pause stopped.
func (f *AtLeader[M]) Resume(context.Context) error {
	if m, ok := f.last(); ok {
		return m.Cont()
	}
	return nil
}
