// The status line: progress shown on a terminal, rewritten in place.

package main

import (
	"fmt"
	"io"
	"os"
)

// status writes a one-line progress status to a terminal, each update
// replacing the last. Where the output is not a terminal (a file, a pipe,
// a CI log) it writes nothing, so that only the results are kept there.
type status struct {
	w     io.Writer
	tty   bool
	shown bool
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
	if !s.tty {
		return
	}
	s.shown = true
	fmt.Fprintf(s.w, "\r\033[K"+format, args...)
}

// clear removes the status, if one is shown.
func (s *status) clear() {
	if s.shown {
		fmt.Fprint(s.w, "\r\033[K")
		s.shown = false
	}
}
