// Package cleanup closes what a process started when SIGINT or SIGTERM
// arrives, then delivers the signal again: the Redis clusters of
// stores/redis/redisnode, the etcd and PostgreSQL servers of
// stores/etcd/etcdproc and stores/postgres/pgproc and the ZooKeeper ensembles of
// stores/zookeeper/zkproc register here, so that Ctrl-C removes their
// containers, networks and directories.
package cleanup

import (
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// The open resources of this process, closed when SIGINT or SIGTERM arrives.
var open struct {
	mu   sync.Mutex
	set  map[io.Closer]struct{}
	sig  chan os.Signal
	stop chan struct{}
}

// Track registers c; the first one installs the signal handler.
func Track(c io.Closer) {
	open.mu.Lock()
	defer open.mu.Unlock()
	if open.set == nil {
		open.set = map[io.Closer]struct{}{}
	}
	open.set[c] = struct{}{}
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

// Untrack forgets c; the last one removes the signal handler.
func Untrack(c io.Closer) {
	open.mu.Lock()
	defer open.mu.Unlock()
	delete(open.set, c)
	if len(open.set) == 0 && open.sig != nil {
		signal.Stop(open.sig)
		close(open.stop)
		open.sig, open.stop = nil, nil
	}
}

// onSignal closes everything open when a signal arrives, then delivers the
// signal again, so the process ends as it would have without the handler
// (or, where the program has its own handler, that handler sees it).
func onSignal(sig chan os.Signal, stop chan struct{}) {
	select {
	case <-stop:
		return
	case s := <-sig:
		open.mu.Lock()
		var cs []io.Closer
		for c := range open.set {
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
