package locklab

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Two pools that began half a period apart ask the Sentinels half a period
// apart, also after a stall has held both past their turn: the questions
// keep to each pool's grid instead of lining up behind the stall.
func TestSentinelRefreshGrid(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	pools := []*SentinelPool{
		{opts: SentinelOptions{Refresh: time.Second}, phase: at(0)},
		{opts: SentinelOptions{Refresh: time.Second}, phase: at(500 * time.Millisecond)},
	}
	pools[0].asked(at(300 * time.Millisecond))
	assert.Equal(t, at(time.Second), pools[0].due)
	pools[1].asked(at(800 * time.Millisecond))
	assert.Equal(t, at(1500*time.Millisecond), pools[1].due)

	// Both stalled until 3.7s, then asked in the same millisecond.
	for _, p := range pools {
		p.asked(at(3700 * time.Millisecond))
	}
	assert.Equal(t, at(4*time.Second), pools[0].due)
	assert.Equal(t, at(4500*time.Millisecond), pools[1].due)

	// On a grid point exactly: the next one.
	pools[0].asked(at(4 * time.Second))
	assert.Equal(t, at(5*time.Second), pools[0].due)
}
