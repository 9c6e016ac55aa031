package strategytest_test

import (
	"os"
	"testing"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/strategies"
	"github.com/locklab/locklab/strategies/setnxex"
	"github.com/locklab/locklab/strategies/strategytest"
)

// Running the suite on a strategy of your own: register it under a name of
// its own, with the properties it claims, then call Run from a test with a
// Config on a Redis you run. Here the lock is set-nx-px under another name;
// yours would be your own constructor.
func Example() {
	strategies.MustRegister(strategies.Description{
		Name:    "my-lock",
		Family:  "mine",
		Summary: "SET NX PX with a token; release by compare-and-delete",
		Source:  "Redis docs, SET command page",
		Properties: strategies.Properties{AtomicAcquire: true, ServerTTL: true,
			OwnerCheckedRelease: true, Fencing: true, Extend: true},
	}, func(cfg locklab.Config) (locklab.Locker, error) { return setnxex.NewSetNXPX(cfg) })

	// In a _test.go file of your package:
	testMyLock := func(t *testing.T) {
		addr := os.Getenv("REDIS_ADDR") // a Redis you run, e.g. 127.0.0.1:6379
		if addr == "" {
			t.Skip("set REDIS_ADDR")
		}
		pool := locklab.NewPool(addr)
		defer pool.Close()
		strategytest.Run(t, "my-lock", func() locklab.Config { return locklab.Config{Pool: pool} })
	}
	_ = testMyLock
}
