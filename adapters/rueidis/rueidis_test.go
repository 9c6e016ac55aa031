package rueidis_test

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	locklabrueidis "github.com/locklab/locklab/adapters/rueidis"
	"github.com/locklab/locklab/internal/tooling/adaptertest"
)

func newSource(tb testing.TB, addr string) locklab.ConnSource {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(tb, err)
	tb.Cleanup(c.Close)
	return locklabrueidis.New(c)
}

func TestAdapter(t *testing.T) {
	adaptertest.Run(t, newSource)
}
