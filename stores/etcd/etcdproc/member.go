// One member: its status, client and process, the faults done to it (kill,
// restart, pause, resume) and its log.

package etcdproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Status asks m for its status (maintenance API), within 1s or ctx.
func (m *Member) Status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return m.client.Status(cctx, m.ClientURL)
}

// Client is the cluster's client on m's endpoint alone; it belongs to the
// cluster, which closes it: do not close it.
func (m *Member) Client() *clientv3.Client { return m.client }

// Pid is the process id, or 0 when it is not running.
func (m *Member) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.box != nil {
		return m.pid
	}
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Exited is closed when the current process has exited (nil when none was
// started).
func (m *Member) Exited() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// Running reports whether m's process runs and is not paused.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.box != nil {
		return m.pid != 0 && !m.stopped
	}
	if m.cmd == nil || m.stopped {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Kill kills the process with SIGKILL, as a crash would, and waits for it
// to exit. The data directory stays for Restart. Killing a member that
// is not running does nothing.
func (m *Member) Kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.killLocked()
}

func (m *Member) killLocked() {
	if m.box != nil {
		m.killBox()
		return
	}
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot be reaped
	m.cmd.Process.Kill()
	<-m.done
	m.cmd, m.stopped = nil, false
}

// Restart kills the process if it runs and starts it again with the same
// flags on the same data directory, so that it comes back with its raft
// log and database and rejoins as the same member. It returns once m
// serves a linearizable read: it has caught up with the leader.
func (m *Member) Restart(ctx context.Context) error {
	m.Kill()
	wctx, cancel := context.WithTimeout(ctx, m.c.opts.StartTimeout)
	defer cancel()
	delay := 10 * time.Millisecond
	for {
		if err := m.launch(m.c.initialCluster()); err != nil {
			return err
		}
		err := m.c.waitHealthy(wctx, []*Member{m})
		if err == nil {
			return nil
		}
		m.Kill()
		if !errors.Is(err, errPortTaken) || wctx.Err() != nil {
			return err
		}
		select { // the port may linger a moment after the kill
		case <-wctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// Stop pauses the process with SIGSTOP, as a frozen host would: its
// connections stay open and it answers nothing, to clients or peers.
func (m *Member) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.box != nil {
		return m.signalBox("STOP", true)
	}
	if m.cmd == nil {
		return fmt.Errorf("etcdproc: member %s not running", m.Name)
	}
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	m.stopped = true
	return nil
}

// Cont resumes a process paused by Stop.
func (m *Member) Cont() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.box != nil {
		return m.signalBox("CONT", false)
	}
	if m.cmd == nil {
		return fmt.Errorf("etcdproc: member %s not running", m.Name)
	}
	if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	m.stopped = false
	return nil
}

// LogTail returns the last n lines of the member's log.
func (m *Member) LogTail(n int) string {
	if m.box != nil {
		return m.box.LogTail(n)
	}
	b, err := os.ReadFile(m.LogPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// String returns the member's name.
func (m *Member) String() string { return m.Name }
