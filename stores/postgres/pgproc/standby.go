// Streaming replication: a standby of a server, its link to the primary cut
// and made again, the wait until it has replayed, and its promotion.

package pgproc

import (
	"context"
	"fmt"
	"time"
)

// StartStandby makes a streaming standby of s: pg_basebackup -R (which
// writes standby.signal and primary_conninfo) into a data directory of its
// own, then postgres on it with opts, and returns once the standby streams
// from s. The standby runs on its primary's backend (opts.Backend is that
// one or ""): on the process backend in a temporary directory of its own
// and on a free port, on the docker backend in a container of its own on
// the primary's network (and with its labels: opts.Label is not read),
// streaming from the primary's container address. Locks are not
// replicated: a standby promoted after the primary fails knows nothing of
// the primary's advisory locks or row locks.
func (s *Server) StartStandby(ctx context.Context, opts Options) (*Server, error) {
	if opts.Backend != "" && opts.Backend != s.Backend() {
		return nil, fmt.Errorf("pgproc: a standby runs on its primary's backend, %s, not %s", s.Backend(), opts.Backend)
	}
	if s.net != nil {
		return s.startDockerStandby(ctx, opts)
	}
	sb, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	if err := sb.run(ctx, "pg_basebackup", "-D", sb.DataDir, "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-d", s.ConnString()); err != nil {
		sb.removeDir()
		return nil, err
	}
	if err := sb.startFresh(ctx); err != nil {
		sb.removeDir()
		return nil, err
	}
	if err := sb.waitStreaming(ctx); err != nil {
		sb.Close()
		return nil, err
	}
	return sb, nil
}

// waitStreaming polls pg_stat_wal_receiver until the standby streams.
func (s *Server) waitStreaming(ctx context.Context) error {
	delay := 2 * time.Millisecond
	for {
		var status string
		err := s.query(ctx, "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), '')", &status)
		if err == nil && status == "streaming" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby %s does not stream (status %q, %v): %w\n%s", s.where(), status, err, ctx.Err(), s.LogTail(10))
		case <-s.Exited():
			return fmt.Errorf("standby %s exited\n%s", s.where(), s.LogTail(10))
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// WaitReplayed returns once the standby s has replayed all the WAL
// primary had flushed when it was called: every transaction committed by
// then (commits are synchronous). WAL of transactions still open, such as
// a row lock's, may not be flushed yet, and is not waited for.
func (s *Server) WaitReplayed(ctx context.Context, primary *Server) error {
	var lsn string
	if err := primary.query(ctx, "SELECT pg_current_wal_flush_lsn()::text", &lsn); err != nil {
		return err
	}
	delay := 2 * time.Millisecond
	for {
		var done bool
		err := s.query(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn, false)", &done)
		if err == nil && done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby %s has not replayed %s (%v): %w", s.where(), lsn, err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// StopStreaming cuts the standby s off from its primary: its WAL receiver
// stops (primary_conninfo is emptied with ALTER SYSTEM and a reload) and
// StopStreaming returns once it has, so that every write the primary makes
// from then on is one the standby misses, as when the network between
// them fails. StartStreaming connects it again.
func (s *Server) StopStreaming(ctx context.Context) error {
	s.mu.Lock()
	known := s.conninfo != ""
	s.mu.Unlock()
	if !known {
		var ci string
		if err := s.query(ctx, "SHOW primary_conninfo", &ci); err != nil {
			return fmt.Errorf("reading the primary_conninfo of the standby %s: %w", s.where(), err)
		}
		if ci == "" {
			return fmt.Errorf("the server %s streams from no primary", s.where())
		}
		s.mu.Lock()
		s.conninfo = ci
		s.mu.Unlock()
	}
	if err := s.exec(ctx, "ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	delay := 2 * time.Millisecond
	for {
		var n int
		err := s.query(ctx, "SELECT count(*)::int FROM pg_stat_wal_receiver", &n)
		if err == nil && n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the WAL receiver of the standby %s does not stop (%v): %w", s.where(), err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// StartStreaming connects the standby s that StopStreaming cut off to its
// primary again and returns once it streams; WaitReplayed then waits until
// it has caught up.
func (s *Server) StartStreaming(ctx context.Context) error {
	s.mu.Lock()
	ci := s.conninfo
	s.mu.Unlock()
	if ci == "" {
		return s.waitStreaming(ctx)
	}
	if err := s.exec(ctx, "ALTER SYSTEM SET primary_conninfo = "+quote(ci), "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	return s.waitStreaming(ctx)
}

// Promote promotes the standby s with pg_ctl promote (in its container,
// on the docker backend) and returns once it accepts writes (it assigns a
// transaction id). Its DSN stays the same.
func (s *Server) Promote(ctx context.Context) error {
	if err := s.tool(ctx, "pg_ctl", "promote", "-D", s.DataDir, "-w", "-t", "60"); err != nil {
		return err
	}
	delay := 2 * time.Millisecond
	for {
		var xid string
		err := s.query(ctx, "SELECT pg_current_xact_id()::text", &xid)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promoted server %s takes no writes (%v): %w", s.where(), err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// SetSynchronous sets, by ALTER SYSTEM and a reload, the standbys whose
// acknowledgement a commit waits for (synchronous_standby_names: "*" is
// any standby streaming from s) and the synchronous_commit of the
// sessions that set none of their own (commit: "on", "local"...); ""
// resets either to the server's default (no synchronous standby; on). It
// returns once a new session sees them. PostgreSQL's documentation,
// "Synchronous Replication": a commit of a session whose synchronous_commit
// is on waits until a synchronous standby has flushed its WAL, and one
// whose synchronous_commit is local does not; with no standby named,
// on is local.
func (s *Server) SetSynchronous(ctx context.Context, standbys, commit string) error {
	set := func(name, v string) string {
		if v == "" {
			return "ALTER SYSTEM RESET " + name
		}
		return "ALTER SYSTEM SET " + name + " = " + quote(v)
	}
	if err := s.exec(ctx, set("synchronous_standby_names", standbys), set("synchronous_commit", commit),
		"SELECT pg_reload_conf()"); err != nil {
		return err
	}
	if commit == "" {
		commit = "on"
	}
	delay := 2 * time.Millisecond
	for {
		var names, sc string
		err := s.query(ctx, "SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit')", &names, &sc)
		if err == nil && names == standbys && sc == commit {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the server %s does not take synchronous_standby_names %q and synchronous_commit %s (%v): %w",
				s.where(), standbys, commit, err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// WaitSynchronous returns once a standby streams from s as a synchronous
// one (pg_stat_replication's sync_state "sync"): from then on a commit
// that waits for it is acknowledged. A standby whose primary restarted
// connects again within wal_retrieve_retry_interval.
func (s *Server) WaitSynchronous(ctx context.Context) error {
	delay := 2 * time.Millisecond
	for {
		var n int
		err := s.query(ctx, "SELECT count(*)::int FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'", &n)
		if err == nil && n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no synchronous standby streams from %s (%v): %w", s.where(), err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}
