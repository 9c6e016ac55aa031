// The PostgreSQL store's node: a server, the standby a failover promotes,
// and the faults the harness strikes it with.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locklab/locklab/stores/postgres/pgproc"
)

// Name is the store of the strategies of family "postgres".
const Name = "postgres"

// Node is a PostgreSQL server that runs of the postgres family's
// strategies lock on. Kill and Restart strike its postmaster; a restart
// keeps the data directory either way (a database keeps its tables on
// disk: only its sessions, and the locks they held, are lost).
//
// Failover promotes an asynchronous streaming standby in the primary's
// place. Prepare, which a failover scenario's runs call, starts one (or
// connects the one there to the primary again); the store cuts it off once
// it has emptied the run's key and the standby has replayed that, so that
// it misses every write of the run, as Replicated's Redis replica does.
// Failover kills the primary (SIGKILL), closes it, and promotes the
// standby; from then on Primary is the promoted server, and clients that
// connect to the node reach it, as through an address that moves with the
// primary. The next Prepare starts a new standby of it.
//
// The runs of a column on a synchronous standby (syncColumns) keep the
// standby streaming instead (Synchronous): the primary names it in
// synchronous_standby_names, and their sessions' commits wait for it.
type Node struct {
	NodeName string
	// Server is the server the node starts on: its primary until a
	// failover (Primary).
	Server *pgproc.Server

	mu sync.Mutex
	// promoted is the primary since the last failover (nil: Server);
	// standby the streaming standby (nil: none yet, or promoted).
	promoted, standby *pgproc.Server
	// lag: the run being prepared cuts the standby off once the store has
	// emptied its key (cutStandby); cut: the standby is cut off.
	lag, cut bool
	// synced is the primary Synchronous set up, whose commits wait for
	// any standby where the session asks (nil: none).
	synced *pgproc.Server
	// syncUsers counts the open stores of a synchronous column
	// (Synchronous): once none is left the node drops its synchronous
	// standby (leaveSync), which would replicate every other column's
	// writes too.
	syncUsers int
}

// Name returns the node's name.
func (n *Node) Name() string { return n.NodeName }

// Primary is the server that clients of the node reach: Server, or the
// standby the last failover promoted.
func (n *Node) Primary() *pgproc.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.primaryLocked()
}

// Addr returns the primary's "host:port".
func (n *Node) Addr() string {
	return net.JoinHostPort(n.Primary().Host, strconv.Itoa(n.Primary().Port))
}

// Store returns Name.
func (n *Node) Store() string { return Name }

// Kill stops the primary's postmaster at once (SIGKILL); its backends end
// with it.
func (n *Node) Kill(context.Context) error {
	n.Primary().KillPostmaster()
	return nil
}

// Restart kills the primary if it runs and starts it again on the same
// data directory, whatever keepData says.
func (n *Node) Restart(ctx context.Context, _ bool) error { return n.Primary().Restart(ctx) }

// dial wraps a pgx dial function so that it connects to the node's
// primary of the moment, whatever address the connection was configured
// with: after a failover, new connections reach the promoted server.
func (n *Node) dial(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dial(ctx, network, n.Addr())
	}
}

// Prepare gets the node ready for a run that may fail over: a standby
// streams from the primary (a new one after a failover), and the store
// cuts it off once it has emptied the run's key.
func (n *Node) Prepare(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.streamLocked(ctx, n.primaryLocked()); err != nil {
		return err
	}
	n.lag = true
	return nil
}

// primaryLocked is Primary, n.mu held.
func (n *Node) primaryLocked() *pgproc.Server {
	if n.promoted != nil {
		return n.promoted
	}
	return n.Server
}

// streamLocked makes a standby stream from primary: it starts one where
// there is none, and connects the one cut off again.
func (n *Node) streamLocked(ctx context.Context, primary *pgproc.Server) error {
	switch {
	case n.standby == nil:
		sb, err := primary.StartStandby(ctx, pgproc.Options{})
		if err != nil {
			return fmt.Errorf("node %s: %w", n.NodeName, err)
		}
		n.standby = sb
	case n.cut:
		if err := n.standby.StartStreaming(ctx); err != nil {
			return fmt.Errorf("node %s: %w", n.NodeName, err)
		}
	}
	n.cut = false
	return nil
}

// cutStandby cuts the standby off from the primary, once it has replayed
// everything the primary has written, when the run was prepared for a
// failover: the standby then misses every write of the run.
func (n *Node) cutStandby(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.lag || n.standby == nil {
		return nil
	}
	n.lag = false
	if err := n.standby.WaitReplayed(ctx, n.primaryLocked()); err != nil {
		return fmt.Errorf("node %s: %w", n.NodeName, err)
	}
	if err := n.standby.StopStreaming(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.NodeName, err)
	}
	n.cut = true
	return nil
}

// Synchronous gets the node ready for a run of a column on a synchronous
// standby, in place of cutStandby: a standby streams from the primary (one
// is started where there is none, and one cut off is connected again), the
// primary names any standby synchronous (synchronous_standby_names '*')
// and commits locally the sessions that ask for nothing else
// (synchronous_commit local: the other columns' cells, which share the
// server, keep their asynchronous standby), and it returns once the
// standby streams as a synchronous one. The column's sessions ask for
// synchronous_commit on (PostgreSQL's default), and their commits wait
// until the standby has written them.
func (n *Node) Synchronous(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lag = false
	primary := n.primaryLocked()
	if err := n.streamLocked(ctx, primary); err != nil {
		return err
	}
	return n.syncLocked(ctx, primary)
}

// syncLocked has primary name any standby synchronous, where it does not
// already, and returns once one streams as a synchronous standby.
func (n *Node) syncLocked(ctx context.Context, primary *pgproc.Server) error {
	if n.synced != primary {
		if err := primary.SetSynchronous(ctx, "*", "local"); err != nil {
			return fmt.Errorf("node %s: %w", n.NodeName, err)
		}
		n.synced = primary
	}
	if err := primary.WaitSynchronous(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.NodeName, err)
	}
	return nil
}

// Failover kills the primary, removes it, and promotes the standby, which
// lacks every write since the run began (Prepare): it has neither the
// primary's sessions (their advisory locks, their open transactions and
// the row locks these hold) nor the rows written since. Without a standby
// (no Prepare) it is an error.
//
// A synchronous standby (Synchronous) has every committed write instead,
// and the server it becomes gets a synchronous standby of its own, a new
// one, before Failover returns: as in a cluster of three whose other
// standby follows the new primary, the commits after the failover are
// acknowledged by a standby again, where a primary naming a standby it
// does not have would make every one wait for good, and one naming none
// would replicate them asynchronously.
func (n *Node) Failover(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.standby == nil {
		return fmt.Errorf("node %s has no standby to promote", n.NodeName)
	}
	old := n.primaryLocked()
	old.KillPostmaster()
	if err := n.standby.Promote(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.NodeName, err)
	}
	promoted := n.standby
	n.promoted, n.standby, n.lag, n.cut = promoted, nil, false, false
	old.Close()
	if n.synced != old {
		return nil
	}
	if err := n.streamLocked(ctx, promoted); err != nil {
		return err
	}
	return n.syncLocked(ctx, promoted)
}

// useSync notes a store of a synchronous column open on the node.
func (n *Node) useSync() {
	n.mu.Lock()
	n.syncUsers++
	n.mu.Unlock()
}

// leaveSync notes that store closed. The last one to close takes the
// synchronous setting off the primary and drops the standby, so that the
// other columns' runs on the node find it as they would without one: no
// standby replaying their writes, and none to prepare for a failover
// that Prepare does not make itself.
func (n *Node) leaveSync(ctx context.Context) error {
	n.mu.Lock()
	n.syncUsers--
	primary := n.synced
	if n.syncUsers > 0 || primary == nil {
		n.mu.Unlock()
		return nil
	}
	n.synced = nil
	n.mu.Unlock()
	if err := primary.SetSynchronous(ctx, "", ""); err != nil {
		return fmt.Errorf("node %s: %w", n.NodeName, err)
	}
	return n.DropStandby()
}

// DropStandby stops and removes the standby, if any: the cells that
// follow a failover cell run on a lone primary.
func (n *Node) DropStandby() error {
	n.mu.Lock()
	sb := n.standby
	n.standby, n.lag, n.cut = nil, false, false
	n.mu.Unlock()
	if sb == nil {
		return nil
	}
	return sb.Close()
}

// Close stops and removes the node's servers: the standby, the promoted
// primary, and Server (a failover has closed it already).
func (n *Node) Close() error {
	err := n.DropStandby()
	n.mu.Lock()
	p := n.promoted
	n.mu.Unlock()
	if p != nil {
		err = errors.Join(err, p.Close())
	}
	return errors.Join(err, n.Server.Close())
}
