// A restart: the process killed and launched again on the same flags,
// tried again while a port the killed process held lingers.

package serverproc

import (
	"context"
	"errors"
	"time"
)

// ErrPortTaken marks a start that failed because a port was in use: the
// server said so, or another server answered on its port.
var ErrPortTaken = errors.New("port in use")

// PortTaken reports whether err is ErrPortTaken's: Relaunch's retry for a
// server whose start tells a port in use from its other failures.
func PortTaken(err error) bool { return errors.Is(err, ErrPortTaken) }

// Tries returns Relaunch's retry for a server whose start does not tell
// why it failed: start is called again after any failure, n times at the
// most.
func Tries(n int) func(error) bool {
	failed := 0
	return func(error) bool {
		failed++
		return failed < n
	}
}

// Relaunch starts the process again, as after a crash: it kills it if it
// runs, then calls start, which launches it (Launch) and waits until it
// serves, until start succeeds (Retry). A failed start leaves the process
// killed.
func (p *Proc) Relaunch(ctx context.Context, start func() error, retry func(error) bool) error {
	p.Kill()
	return Retry(ctx, start, p.Kill, retry)
}

// Retry calls start until it succeeds. After each failure it calls kill,
// which kills what start started; while retry(err) says yes and ctx
// lasts, start is called again after a pause that doubles from 5ms to
// 200ms: a port a killed process held may linger a moment.
func Retry(ctx context.Context, start func() error, kill func(), retry func(error) bool) error {
	delay := 5 * time.Millisecond
	for {
		err := start()
		if err == nil {
			return nil
		}
		kill()
		if !retry(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
