// The supervisor of a container: the shell that is its first process,
// reached through its stdin and stdout.

package dockerbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
)

// Supervisor is this process's end of a supervised container's first
// process: its stdin, and the lines of its stdout. Each command sent is a
// line (and, for a command with a body, the body's lines and "."), each
// answer one line.
type Supervisor struct {
	mu    sync.Mutex
	in    *io.PipeWriter
	out   *io.PipeWriter
	lines chan string
	done  chan struct{} // closed by close
	conn  dc.CloseWaiter
	// broken is set when an answer did not come: the commands and answers
	// are out of step from then on.
	broken error
	// skip counts the answers of commands whose callers stopped waiting
	// (their ctx ended): the next command reads and drops them first.
	skip int
}

// Attach attaches to the stdin and stdout of container id, whose first
// process reads commands on its stdin (the container is made with
// OpenStdin) and answers each with a line on its stdout.
func Attach(cli *dc.Client, id string) (*Supervisor, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	v := &Supervisor{in: inW, out: outW, lines: make(chan string, 16), done: make(chan struct{})}
	attached := make(chan struct{})
	conn, err := cli.AttachToContainerNonBlocking(dc.AttachToContainerOptions{
		Container: id, InputStream: inR, OutputStream: outW, ErrorStream: io.Discard,
		Stdin: true, Stdout: true, Stream: true, Success: attached,
	})
	if err != nil {
		return nil, err
	}
	v.conn = conn
	// The engine has attached once it answered the request.
	select {
	case <-attached:
		attached <- struct{}{}
	case <-time.After(10 * time.Second):
		v.Close()
		return nil, errors.New("attaching took over 10s")
	}
	go func() {
		defer close(v.lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			select {
			case v.lines <- sc.Text():
			case <-v.done: // an answer nobody waits for any more
				return
			}
		}
	}()
	return v, nil
}

// ErrContainerRemoved is what a command to the supervisor of a removed
// container returns.
var ErrContainerRemoved = errors.New("supervisor: the container is removed")

// Do sends cmd (and the lines of body, then ".", when body is not nil) and
// returns the answer. A caller whose ctx ends before the answer comes gets
// ctx's error; the answer is dropped when it comes, and the supervisor
// stays usable. An answer that takes longer than answerLimit breaks it. A nil
// Supervisor, a supervised container's once the container is removed,
// answers ErrContainerRemoved: a fault that reaches a server after it was
// closed (a run interrupted in the middle of one) fails instead of
// panicking.
func (v *Supervisor) Do(ctx context.Context, cmd string, body []string) (string, error) {
	if v == nil {
		return "", ErrContainerRemoved
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.broken != nil {
		return "", v.broken
	}
	limit := answerLimit(cmd)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	// next waits for the next line: ok false with v.broken set, or with
	// ctx's error when ctx ended first. A ctx that has ended already wins
	// over a line that is there already (a select picks either): a
	// command sent on an ended ctx is never answered as if it had been
	// waited for.
	next := func(what string) (string, bool, error) {
		ended := func() (string, bool, error) {
			return "", false, fmt.Errorf("supervisor: no answer to %q: %w", what, ctx.Err())
		}
		if ctx.Err() != nil {
			return ended()
		}
		select {
		case line, ok := <-v.lines:
			if !ok {
				v.broken = errors.New("supervisor: its output ended")
				return "", false, v.broken
			}
			return line, true, nil
		case <-ctx.Done():
			return ended()
		case <-timer.C:
			v.broken = fmt.Errorf("supervisor: no answer to %q within %v", what, limit)
			return "", false, v.broken
		}
	}
	for v.skip > 0 {
		if _, ok, err := next("an earlier command"); !ok {
			return "", err
		}
		v.skip--
	}
	msg := cmd + "\n"
	if body != nil {
		msg += strings.Join(append(body, "."), "\n") + "\n"
	}
	if _, err := io.WriteString(v.in, msg); err != nil {
		v.broken = fmt.Errorf("supervisor: %w", err)
		return "", v.broken
	}
	line, ok, err := next(cmd)
	if !ok && v.broken == nil {
		v.skip++ // the answer will come: the next command drops it
	}
	return line, err
}

// answerLimit is how long the answer to cmd may take before the supervisor
// is taken for broken: a minute, and 2 minutes for a program run to its
// end ("run": initdb, pg_basebackup), which a loaded machine slows down far
// more than a signal, a start or a file write. A start of postgres took
// over 10s during a full test run beside every store's containers.
func answerLimit(cmd string) time.Duration {
	if strings.HasPrefix(cmd, "run ") {
		return 2 * time.Minute
	}
	return time.Minute
}

// OK sends cmd and expects "ok".
func (v *Supervisor) OK(ctx context.Context, cmd string, body []string) error {
	a, err := v.Do(ctx, cmd, body)
	if err == nil && a != "ok" {
		err = fmt.Errorf("supervisor: %s: %s", cmd, a)
	}
	return err
}

// Close ends the attachment (the container's stdin stays open).
func (v *Supervisor) Close() {
	close(v.done)
	v.in.Close()
	v.out.Close()
	v.conn.Close()
}
