package rueidis_test

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/internal/adaptertest"
	locklabrueidis "github.com/locklab/locklab/adapters/rueidis"
)

// newClient is a rueidis client of the servers at addrs, as the tests make
// them: one server's, or a cluster's; closed when tb ends.
func newClient(tb testing.TB, addrs ...string) rueidis.Client {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	require.NoError(tb, err)
	tb.Cleanup(c.Close)
	return c
}

func newSource(tb testing.TB, addr string) locklab.ConnSource {
	return locklabrueidis.New(newClient(tb, addr))
}

func TestAdapter(t *testing.T) {
	adaptertest.Run(t, newSource)
}
