// Cleanup on a signal: the open clusters of this process are closed when
// SIGINT or SIGTERM arrives, then the signal is delivered again.

package node

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// The open clusters of this process, closed when SIGINT or SIGTERM arrives.
var open struct {
	mu       sync.Mutex
	clusters map[*Cluster]struct{}
	sig      chan os.Signal
	stop     chan struct{}
}

// track registers c; the first open cluster installs the signal handler.
func track(c *Cluster) {
	open.mu.Lock()
	defer open.mu.Unlock()
	if open.clusters == nil {
		open.clusters = map[*Cluster]struct{}{}
	}
	open.clusters[c] = struct{}{}
	if open.sig == nil {
		open.sig = make(chan os.Signal, 1)
		open.stop = make(chan struct{})
		// A signal the process ignores (SIGINT in a background job) cannot
		// end it, so it needs no cleanup and stays ignored.
		for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
			if !signal.Ignored(s) {
				signal.Notify(open.sig, s)
			}
		}
		go onSignal(open.sig, open.stop)
	}
}

// untrack forgets c; the last one removes the signal handler.
func untrack(c *Cluster) {
	open.mu.Lock()
	defer open.mu.Unlock()
	delete(open.clusters, c)
	if len(open.clusters) == 0 && open.sig != nil {
		signal.Stop(open.sig)
		close(open.stop)
		open.sig, open.stop = nil, nil
	}
}

// onSignal closes every open cluster when a signal arrives, then delivers the
// signal again, so the process ends as it would have without the handler (or,
// where the program has its own handler, that handler sees it).
func onSignal(sig chan os.Signal, stop chan struct{}) {
	select {
	case <-stop:
		return
	case s := <-sig:
		open.mu.Lock()
		var cs []*Cluster
		for c := range open.clusters {
			cs = append(cs, c)
		}
		open.mu.Unlock()
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
		wg.Wait()
		signal.Stop(sig) // with no other handler, the default action is back
		if ss, ok := s.(syscall.Signal); ok {
			syscall.Kill(os.Getpid(), ss)
		}
	}
}
