// Package zktest gives tests throwaway ZooKeeper ensembles (zkproc): one
// of their own, closed when the test ends, or the test binary's shared
// one, started once and closed after the tests. It fails the test with
// the install hint where ZooKeeper or java is missing: a lock tested
// against no server proves nothing.
//
// A JVM takes about a second of CPU to start, and three of them two
// seconds on two cores: a package whose tests only read and write (and
// fault nothing) shares one ensemble, and its TestMain starts it in the
// background before the tests run:
//
//	func TestMain(m *testing.M) {
//		zktest.Prestart()
//		zktest.Main(m)
//	}
package zktest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/stores/zookeeper/zkproc"
)

// startTimeout bounds an ensemble's start.
const startTimeout = 2 * time.Minute

// Start starts an ensemble with opts; it is closed when the test ends.
func Start(tb testing.TB, opts zkproc.Options) *zkproc.Ensemble {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	e, err := zkproc.Start(ctx, opts)
	if err != nil {
		tb.Fatalf("starting zookeeper: %v", err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

// SharedConfig are the shared ensemble's lines of zoo.cfg beyond zkproc's:
// its servers grant a session up to a minute (zkproc's tickTime holds it
// to 4s otherwise), so that a client on a loaded machine, where a server
// may not answer a ping for seconds, can ask for a session that outlives
// the stall. A test that waits for a session to expire asks for a short
// one.
var SharedConfig = []string{"maxSessionTimeout=60000"}

// shared is the test binary's shared ensemble.
var shared struct {
	once   sync.Once
	done   chan struct{} // closed once the start ended
	cancel context.CancelFunc
	e      *zkproc.Ensemble
	err    error
}

// Prestart starts the shared ensemble in the background, if it is not
// started yet, and returns at once.
func Prestart() { begin() }

func begin() {
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		shared.done, shared.cancel = make(chan struct{}), cancel
		go func() {
			defer close(shared.done)
			shared.e, shared.err = zkproc.Start(ctx, zkproc.Options{Config: SharedConfig})
		}()
	})
}

// Shared returns the shared ensemble: three servers, started by the first
// call (or Prestart) and kept for the test binary. It waits for the start
// and for the ensemble to be healthy. Its tests must leave it as they
// found it: a test that kills, pauses or restarts servers starts an
// ensemble of its own.
func Shared(tb testing.TB) *zkproc.Ensemble {
	tb.Helper()
	begin()
	<-shared.done
	if shared.err != nil {
		tb.Fatalf("starting the shared zookeeper ensemble: %v", shared.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := shared.e.WaitHealthy(ctx); err != nil {
		tb.Fatalf("the shared zookeeper ensemble (%s): %v", shared.e.Describe(), err)
	}
	return shared.e
}

// CloseShared closes the shared ensemble, waiting for a start under way
// (cut short); it does nothing when none was started.
func CloseShared() {
	shared.once.Do(func() {}) // none may start after this
	if shared.done == nil {
		return
	}
	shared.cancel()
	<-shared.done
	if shared.e != nil {
		shared.e.Close()
	}
}

// Main runs the tests, closes the shared ensemble, and exits with the
// tests' status: a TestMain's last call.
func Main(m *testing.M) {
	code := m.Run()
	CloseShared()
	os.Exit(code)
}
