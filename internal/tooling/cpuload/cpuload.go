// Package cpuload loads the machine for tests that must hold on a busy
// one: a spinning thread for every core, beside whatever else runs.
package cpuload

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Env is the variable that runs the tests that load the machine (make
// test-load): they would make the other packages' tests, which go test
// runs beside them, wait for cores, so the other runs skip them.
const Env = "LOCKLAB_LOAD_TESTS"

// Skip skips tb unless Env is set.
func Skip(tb testing.TB) {
	tb.Helper()
	if os.Getenv(Env) == "" {
		tb.Skipf("loads every core: set %s=1 to run it (make test-load)", Env)
	}
}

// Burn starts a goroutine that spins for each of the machine's cores, on
// as many processors added to GOMAXPROCS (so that the test's own
// goroutines keep theirs, and the kernel shares the cores between the
// spinning threads, the test and the servers it runs), and returns the
// function that stops them and gives GOMAXPROCS back. The test's cleanup
// stops them too.
func Burn(tb testing.TB) (stop func()) {
	n := runtime.NumCPU()
	prev := runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + n)
	var done atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for x := uint64(1); !done.Load(); x = x*6364136223846793005 + 1442695040888963407 {
			}
		})
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			done.Store(true)
			wg.Wait()
			runtime.GOMAXPROCS(prev)
		})
	}
	tb.Cleanup(stop)
	return stop
}
