package stress

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLockConfigIsComplete: a stress client's Config names its clock and
// token source, so that a lock that reads them itself does not find nil.
func TestLockConfigIsComplete(t *testing.T) {
	cfg := lockConfig(4 * time.Second)
	require.NotNil(t, cfg.Clock)
	require.NotNil(t, cfg.Rand)
	b := make([]byte, 8)
	_, err := io.ReadFull(cfg.Rand, b)
	require.NoError(t, err)
	assert.Equal(t, time.Second, cfg.Retry.Max)
}
