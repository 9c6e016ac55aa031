package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/stores/redis/redisnode"
)

// cliChildEnv makes the test binary run the CLI itself: the signal tests
// start it as a separate process and interrupt it.
const cliChildEnv = "LOCKLAB_CLI_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(cliChildEnv) != "" {
		Main()
		os.Exit(0)
	}
	// Every process the tests start from this binary is the CLI: stress's
	// worker processes, which the runs start without knowing of tests,
	// too. Set once here, it lets the tests that run them be parallel
	// (t.Setenv would not).
	os.Setenv(cliChildEnv, "1")
	os.Exit(m.Run())
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// leftovers lists what the run of process pid, whose temporary directory
// is tmp, left behind: locklab-redis-* directories in tmp, redis-server
// processes working there, and containers and networks labelled with pid.
func leftovers(t *testing.T, pool *dockertest.Pool, pid int, tmp string) []string {
	var out []string
	dirs, _ := filepath.Glob(filepath.Join(tmp, "locklab-redis-*"))
	// PostgreSQL's and etcd's directories carry the pid of the run that
	// made them; they may live in /tmp or /dev/shm rather than TMPDIR.
	for _, base := range []string{tmp, os.TempDir(), "/tmp", "/dev/shm"} {
		for _, store := range []string{"pg", "etcd"} {
			d, _ := filepath.Glob(filepath.Join(base, "locklab-"+store+"-"+strconv.Itoa(pid)+"-*"))
			dirs = append(dirs, d...)
		}
	}
	for _, d := range dirs {
		out = append(out, "dir "+d)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmdline := string(b)
		mine := strings.Contains(cmdline, "redis-server") && strings.Contains(cmdline, tmp)
		for _, d := range dirs {
			mine = mine || strings.Contains(cmdline, d)
		}
		if mine {
			out = append(out, "process "+filepath.Base(filepath.Dir(p)))
		}
	}
	if pool != nil {
		filter := map[string][]string{"label": {redisnode.LabelPid + "=" + strconv.Itoa(pid)}}
		cs, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: filter})
		require.NoError(t, err)
		for _, c := range cs {
			out = append(out, "container "+strings.Join(c.Names, ","))
		}
		ns, err := pool.Client.FilteredListNetworks(dc.NetworkFilterOpts{"label": {redisnode.LabelPid + "=" + strconv.Itoa(pid): true}})
		require.NoError(t, err)
		for _, n := range ns {
			out = append(out, "network "+n.Name)
		}
	}
	return out
}

// dockerPool is a client of the Docker engine for the docker backend (the
// test is skipped where none answers), nil for the others.
func dockerPool(t *testing.T, be string) *dockertest.Pool {
	if be != backends.Docker {
		return nil
	}
	p, err := dockertest.NewPool("")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = p.Client.PingWithContext(ctx)
		cancel()
	}
	if err != nil {
		t.Skip("no Docker engine:", err)
	}
	return p
}

// TestInterruptLeavesNothing interrupts `locklab matrix` three times on each
// backend: while its nodes start, while it runs, and with three Ctrl-Cs in a
// row. Every run must remove what it created before it exits.
func TestInterruptLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the CLI six times")
	}
	for _, be := range []string{backends.Process, backends.Docker} {
		t.Run(be, func(t *testing.T) {
			pool := dockerPool(t, be)
			for run, when := range []string{"starting", "running", "running, three times"} {
				tmp := t.TempDir()
				var stderr lockedBuffer
				cmd := exec.Command(os.Args[0], "matrix", "--backend", be)
				cmd.Env = append(os.Environ(), cliChildEnv+"=1", "TMPDIR="+tmp)
				cmd.Stderr = &stderr
				require.NoError(t, cmd.Start())
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				pid := cmd.Process.Pid

				// Wait for the moment to interrupt: the first node being
				// created, or the first matrix cell done.
				ready := func() bool {
					if when == "starting" {
						return len(leftovers(t, pool, pid, tmp)) > 0
					}
					return strings.Contains(stderr.String(), " × ")
				}
				// A loaded machine (CI runs the docs' whole matrix
				// beside) takes minutes to start every store's servers.
				deadline := time.Now().Add(6 * time.Minute)
				for !ready() {
					select {
					case err := <-exited:
						t.Fatalf("run %d exited before the interrupt: %v\n%s", run+1, err, stderr.String())
					case <-time.After(5 * time.Millisecond):
					}
					require.True(t, time.Now().Before(deadline), "run %d never got %s\n%s", run+1, when, stderr.String())
				}
				n := 1
				if strings.HasSuffix(when, "three times") {
					n = 3
				}
				require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
				for range n - 1 { // later ones may find it gone already
					time.Sleep(20 * time.Millisecond)
					cmd.Process.Signal(syscall.SIGINT)
				}
				select {
				case <-exited:
				case <-time.After(time.Minute):
					cmd.Process.Kill()
					t.Fatalf("run %d did not exit within a minute of SIGINT", run+1)
				}
				assert.Empty(t, leftovers(t, pool, pid, tmp), "run %d, interrupted while %s, left these behind\n%s", run+1, when, stderr.String())
				assert.NotContains(t, stderr.String(), "not all removed", "run %d, interrupted while %s", run+1, when)
			}
		})
	}
}
