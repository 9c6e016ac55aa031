package goredis_test

import (
	"testing"

	"github.com/locklab/locklab/adapters/internal/adaptertest"
)

// TestNotifier: a Notifier on the adapter's Source subscribes through the
// client's own pub/sub (adaptertest.Notifier).
func TestNotifier(t *testing.T) { adaptertest.Notifier(t, newSource) }
