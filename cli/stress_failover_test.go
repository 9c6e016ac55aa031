package cli

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/backends"
)

// The failover fault refuses, before starting anything, what a Sentinel
// group cannot run.
func TestStressFailoverRefuses(t *testing.T) {
	for args, want := range map[string]string{
		"--strategy redlock --node-faults failover":                                      "several independent masters",
		"--strategy set-nx-px --node-faults failover,pause":                              "cannot be combined with pause",
		"--strategy set-nx-px --node-faults failover --addr 127.0.0.1:1":                 "docker or process",
		"--strategy set-nx-px --node-faults failover --backend addrs --addr 127.0.0.1:1": "docker or process",
	} {
		_, _, err := run(t, append([]string{"stress"}, strings.Fields(args)...)...)
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), want, args)
	}
}

// `locklab stress --node-faults failover` runs on each backend, reports
// what the failover did, and leaves no process, container or network
// behind, whether it ends by itself or by Ctrl-C in the middle of the
// failover.
func TestStressFailoverLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Sentinel groups through the CLI")
	}
	for _, be := range []string{backends.Process, backends.Docker} {
		t.Run(be, func(t *testing.T) {
			pool := dockerPool(t, be)
			for _, interrupt := range []bool{false, true} {
				tmp := t.TempDir()
				var stdout, stderr lockedBuffer
				cmd := exec.Command(os.Args[0], "stress", "--backend", be, "--strategy", "set-nx-px",
					"--node-faults", "failover", "--fault-every", "500ms", "--duration", "6s", "--processes")
				cmd.Env = append(os.Environ(), cliChildEnv+"=1", "TMPDIR="+tmp)
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				require.NoError(t, cmd.Start())
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				if interrupt {
					// Interrupt while the master is cut off.
					deadline := time.Now().Add(2 * time.Minute)
					for !strings.Contains(stderr.String(), "Sentinel group") {
						require.True(t, time.Now().Before(deadline), "no Sentinel group started\n%s", stderr.String())
						time.Sleep(10 * time.Millisecond)
					}
					time.Sleep(1500 * time.Millisecond)
					require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
				}
				select {
				case err := <-exited:
					if !interrupt {
						require.NoError(t, err, stderr.String())
						assert.Contains(t, stdout.String(), "failover", "the report lists the failover")
						assert.Contains(t, stdout.String(), "cut off from its replicas and the Sentinels")
					}
				case <-time.After(2 * time.Minute):
					cmd.Process.Kill()
					t.Fatalf("stress did not exit\n%s", stderr.String())
				}
				assert.Empty(t, leftovers(t, pool, cmd.Process.Pid, tmp), "interrupted %v: left behind\n%s", interrupt, stderr.String())
			}
		})
	}
}

// The cluster failover fault refuses, before starting anything, what a
// Redis Cluster cannot run.
func TestStressClusterFailoverRefuses(t *testing.T) {
	for args, want := range map[string]string{
		"--strategy redlock --node-faults cluster-failover":                                      "cannot run on a Redis Cluster",
		"--strategy set-nx-px --node-faults cluster-failover,pause":                              "cannot be combined with pause",
		"--strategy set-nx-px --node-faults cluster-failover,failover":                           "cannot be combined with",
		"--strategy set-nx-px --node-faults cluster-failover --addr 127.0.0.1:1":                 "docker or process",
		"--strategy set-nx-px --node-faults cluster-failover --backend addrs --addr 127.0.0.1:1": "docker or process",
	} {
		_, _, err := run(t, append([]string{"stress"}, strings.Fields(args)...)...)
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), want, args)
	}
}

// `locklab stress --node-faults cluster-failover` runs on each backend,
// reports what the failover did and what it broke, and leaves no process,
// container or network behind, whether it ends by itself or by Ctrl-C in
// the middle of the failover.
func TestStressClusterFailoverLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis Clusters through the CLI")
	}
	for _, be := range []string{backends.Process, backends.Docker} {
		t.Run(be, func(t *testing.T) {
			pool := dockerPool(t, be)
			for _, interrupt := range []bool{false, true} {
				tmp := t.TempDir()
				var stdout, stderr lockedBuffer
				cmd := exec.Command(os.Args[0], "stress", "--backend", be, "--strategy", "set-nx-px",
					"--node-faults", "cluster-failover", "--fault-every", "500ms", "--fault-for", "1s",
					"--duration", "8s", "--pause-prob", "0", "--crash-prob", "0")
				cmd.Env = append(os.Environ(), cliChildEnv+"=1", "TMPDIR="+tmp)
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				require.NoError(t, cmd.Start())
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				if interrupt {
					// Interrupt while the master is cut off or dead.
					deadline := time.Now().Add(2 * time.Minute)
					for !strings.Contains(stderr.String(), "Redis Cluster") {
						require.True(t, time.Now().Before(deadline), "no Redis Cluster started\n%s", stderr.String())
						time.Sleep(10 * time.Millisecond)
					}
					time.Sleep(2 * time.Second)
					require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
				}
				select {
				case err := <-exited:
					if !interrupt {
						require.NoError(t, err, stderr.String())
						out := stdout.String()
						assert.Contains(t, out, "cluster-failover", "the report lists the failover")
						assert.Contains(t, out, "cut off from its replica")
						assert.Contains(t, out, "a replica again")
						assert.NotContains(t, out, "fence refusals  0\n", "the elected replica's fence counter is behind")
						t.Logf("%s", out)
					}
				case <-time.After(2 * time.Minute):
					cmd.Process.Kill()
					t.Fatalf("stress did not exit\n%s", stderr.String())
				}
				assert.Empty(t, leftovers(t, pool, cmd.Process.Pid, tmp), "interrupted %v: left behind\n%s", interrupt, stderr.String())
			}
		})
	}
}
