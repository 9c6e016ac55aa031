// The status line: progress shown on a terminal, rewritten in place, and
// now and then as a line of its own elsewhere.

package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// plainEvery is how often a status goes to output that is not a terminal.
const plainEvery = 10 * time.Second

// status writes a one-line progress status. On a terminal each update
// replaces the last, and clear removes it. Elsewhere (a file, a pipe, a CI
// log) an update is a line of its own, the first at once and then at most
// one every plainEvery, so that a log shows a long run going on without
// being filled with it.
type status struct {
	mu    sync.Mutex // a stopping run's line may come from another goroutine
	w     io.Writer
	tty   bool
	shown bool
	last  time.Time // when the last plain line was written
}

func newStatus(w io.Writer) *status {
	s := &status{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			s.tty = true
		}
	}
	return s
}

// set replaces the status with the formatted text.
func (s *status) set(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty {
		s.shown = true
		fmt.Fprintf(s.w, "\r\033[K"+format, args...)
		return
	}
	if now := time.Now(); s.last.IsZero() || now.Sub(s.last) >= plainEvery {
		s.last = now
		fmt.Fprintf(s.w, format+"\n", args...)
	}
}

// clear removes the status from a terminal, if one is shown.
func (s *status) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
}

func (s *status) clearLocked() {
	if s.shown {
		fmt.Fprint(s.w, "\r\033[K")
		s.shown = false
	}
}

// line writes a line of its own, the status cleared first.
func (s *status) line(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	fmt.Fprintf(s.w, format+"\n", args...)
}

// whileStopping says on s, once ctx has ended and the run has not
// returned within a second, what the run waits for; the returned func
// marks the run returned.
func (s *status) whileStopping(ctx context.Context, what string) (returned func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		select {
		case <-done:
		case <-time.After(time.Second):
			s.line("locklab: interrupted: waiting for %s, then removing the servers", what)
		}
	}()
	return sync.OnceFunc(func() { close(done) })
}
