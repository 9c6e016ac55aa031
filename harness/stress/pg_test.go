package stress_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/harness/stress"
	"github.com/locklab/locklab/internal/tooling/pgproc"
	"github.com/locklab/locklab/internal/tooling/pgproc/pgtest"
	_ "github.com/locklab/locklab/strategies/pglock" // pg-lock-table, pg-for-update, pg-advisory
)

// A PostgreSQL strategy is refused without a server, with node faults
// and with worker processes, which a run on PostgreSQL does not do yet;
// a Redis strategy is refused on PostgreSQL.
func TestPGOptions(t *testing.T) {
	t.Parallel()
	s := &pgproc.Server{} // never started: every case is refused first
	for name, o := range map[string]stress.Options{
		"no server":   {Strategy: "pg-advisory", Nodes: []locklab.ConnSource{nil}},
		"node fault":  {Strategy: "pg-advisory", PG: s, Faults: []node.Fault{node.Pause}},
		"processes":   {Strategy: "pg-advisory", PG: s, Processes: true, WorkerCommand: []string{"locklab", "worker"}},
		"redis on pg": {Strategy: "set-nx-px", PG: s},
	} {
		_, err := stress.Run(context.Background(), o)
		assert.True(t, errors.Is(err, locklab.ErrInvalid), "%s: %v, want ErrInvalid", name, err)
	}
}

// The three PostgreSQL locks under clients that pause past the TTL and
// crash: the session locks (pg-for-update, pg-advisory) hold while their
// session lives, whatever the TTL, so a paused holder keeps the others
// out and a crashed one's session ends with it; the lock table's row
// expires under a paused holder, and the next one overlaps it and loses
// its update (it has no fence).
func TestPGStress(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a PostgreSQL server for several seconds")
	}
	t.Parallel()
	srv := pgtest.Start(t, pgproc.Options{})
	for _, name := range []string{"pg-for-update", "pg-advisory", "pg-lock-table"} {
		rep, err := stress.Run(context.Background(), stress.Options{
			Strategy: name, PG: srv, Clients: 4, Duration: 2 * time.Second, TTL: 100 * time.Millisecond,
			PauseProb: 0.05, CrashProb: 0.01, Seed: 3, Key: "stress:" + name,
		})
		require.NoError(t, err, name)
		t.Logf("%s: %d cycles, %d pauses, %d crashes, %d overlaps, %d lost updates, %d errors (%s)",
			name, rep.Cycles, rep.Pauses, rep.Crashes, rep.Overlaps, rep.LostUpdates, rep.Errors, rep.FirstError)
		assert.Positive(t, rep.Cycles, name)
		assert.Positive(t, rep.Pauses, name)
		assert.Empty(t, rep.Liveness, name)
		if name == "pg-lock-table" {
			assert.Positive(t, rep.Overlaps, "a paused holder's row expires under it")
			assert.True(t, rep.Violated())
			continue
		}
		assert.Zero(t, rep.Overlaps, name)
		assert.Zero(t, rep.LostUpdates, name)
		assert.False(t, rep.Violated(), name)
	}
}
