// The status line: progress shown on a terminal, rewritten in place, and
// now and then as a line of its own elsewhere.

package main

import (
	"fmt"
	"io"
	"os"
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
	if s.shown {
		fmt.Fprint(s.w, "\r\033[K")
		s.shown = false
	}
}
