package pgproc_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/stores/postgres/pgproc"
	"github.com/locklab/locklab/stores/postgres/pgproc/pgtest"
)

// TestSynchronousCommit: with the primary naming any standby synchronous
// (SetSynchronous), a session whose synchronous_commit is on waits at its
// COMMIT while the standby is cut off, its row unseen by the other
// sessions, and goes on once the standby streams again; a session left at
// the server's local does not wait. Every commit acknowledged to an on
// session is on the standby when the primary dies, without waiting for
// its replay. The settings are the primary's own: the standby, copied
// before them, promoted names no synchronous standby.
func TestSynchronousCommit(t *testing.T) {
	onBackends(t, testSynchronousCommit)
}

func testSynchronousCommit(t *testing.T, opts pgproc.Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := pgtest.Start(t, opts)
	pc := connect(t, p)
	_, err := pc.Exec(ctx, "CREATE TABLE r (v int)")
	require.NoError(t, err)
	sb := pgtest.StartStandby(t, p, pgproc.Options{})
	require.NoError(t, p.SetSynchronous(ctx, "*", "local"))
	require.NoError(t, p.WaitSynchronous(ctx))
	pc.Close(ctx)
	pc = connect(t, p)
	assert.Equal(t, "sync", scalar[string](t, pc, "SELECT sync_state FROM pg_stat_replication"))
	assert.Equal(t, "local", scalar[string](t, pc, "SHOW synchronous_commit"), "the server's default")

	cfg, err := pgx.ParseConfig(p.DSN())
	require.NoError(t, err)
	cfg.RuntimeParams["synchronous_commit"] = "on"
	on, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { on.Close(context.Background()) })
	assert.Equal(t, "on", scalar[string](t, on, "SHOW synchronous_commit"), "the session's own")
	_, err = on.Exec(ctx, "INSERT INTO r VALUES (1)")
	require.NoError(t, err, "acknowledged by the streaming standby")

	require.NoError(t, sb.StopStreaming(ctx))
	done := make(chan error, 1)
	go func() {
		_, err := on.Exec(ctx, "INSERT INTO r VALUES (2)")
		done <- err
	}()
	for {
		ev := scalar[string](t, pc, "SELECT coalesce((SELECT wait_event FROM pg_stat_activity WHERE pid = $1), '')", on.PgConn().PID())
		if ev == "SyncRep" {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the commit returned (%v) with the standby cut off", err)
		case <-ctx.Done():
			t.Fatalf("the commit never waits for the standby (wait event %q)", ev)
		case <-time.After(5 * time.Millisecond):
		}
	}
	assert.Equal(t, 1, scalar[int](t, pc, "SELECT count(*)::int FROM r"), "the waiting commit's row is not seen")
	_, err = pc.Exec(ctx, "INSERT INTO r VALUES (3)")
	require.NoError(t, err, "a local session's commit does not wait")
	select {
	case err := <-done:
		t.Fatalf("the commit returned (%v) with the standby cut off", err)
	default:
	}
	require.NoError(t, sb.StartStreaming(ctx))
	require.NoError(t, <-done, "acknowledged once the standby streams again")
	assert.Equal(t, 3, scalar[int](t, pc, "SELECT count(*)::int FROM r"))
	_, err = on.Exec(ctx, "INSERT INTO r VALUES (4)")
	require.NoError(t, err)

	p.KillPostmaster()
	require.NoError(t, sb.Promote(ctx))
	sc := connect(t, sb)
	assert.Equal(t, 4, scalar[int](t, sc, "SELECT count(*)::int FROM r"), "every acknowledged commit survives the failover")
	assert.Equal(t, "", scalar[string](t, sc, "SHOW synchronous_standby_names"), "the primary's setting, made after the copy")
	require.NoError(t, sb.SetSynchronous(ctx, "*", ""))
	require.NoError(t, sb.SetSynchronous(ctx, "", ""))
}
