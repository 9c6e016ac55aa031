package zkproc_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/cpuload"
	"github.com/locklab/locklab/stores/zookeeper/zkproc"
	"github.com/locklab/locklab/stores/zookeeper/zkproc/zktest"
)

// role is what a server says of itself: its mode and the epoch of the
// last transaction it has seen, which every election raises.
type role struct {
	mode  string
	epoch uint32
}

// roles asks every server for its mode and epoch, asking again a server
// that does not answer within FourLetter's second: on a loaded machine a
// JVM may take longer, and a slow answer is no election.
func roles(ctx context.Context, t *testing.T, e *zkproc.Ensemble) map[string]role {
	t.Helper()
	out := map[string]role{}
	for _, s := range e.Servers() {
		for {
			st, err := s.Status(ctx)
			if err == nil {
				out[s.Name()] = role{st.Mode, st.Epoch()}
				break
			}
			require.NoError(t, ctx.Err(), "%s's status: %v", s.Name(), err)
			require.ErrorIs(t, err, context.DeadlineExceeded, "%s's status", s.Name())
		}
	}
	return out
}

// TestNoElectionUnderLoad: with the default timings (DefaultTickTime,
// syncLimit and initLimit in ticks, the election's waits), an ensemble on
// a machine whose every core is busy elects no leader it was not asked
// to: through a hundred rounds of every server's status, each server
// keeps the mode and the epoch of the start. A follower that had dropped
// its leader would have gone looking, and the election it started would
// have raised the epoch, whoever won.
func TestNoElectionUnderLoad(t *testing.T) {
	cpuload.Skip(t)
	const rounds = 100
	e := zktest.Start(t, zkproc.Options{})
	start := roles(ctxFor(t), t, e)

	stop := cpuload.Burn(t)
	for i := range rounds {
		require.Equal(t, start, roles(ctxFor(t), t, e), "after %d rounds under load", i)
	}
	stop()
	assert.Equal(t, start, roles(ctxFor(t), t, e))
}
