package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeroMeansZero: a 0 the user gives is zero where zero has a meaning,
// not the default: no pause, no crash, no preemption, no fault.
func TestZeroMeansZero(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, "stress", "--backend", "process", "-s", "set-nx-px", "--cycles", "20", "--duration", "2m",
		"--pause-prob", "0", "--crash-prob", "0", "--json")
	require.NoError(t, err)
	var rep struct {
		Cycles  int64 `json:"cycles"`
		Pauses  int64 `json:"pauses"`
		Crashes int64 `json:"crashes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Positive(t, rep.Cycles)
	assert.Zero(t, rep.Pauses, "--pause-prob 0 pauses nobody")
	assert.Zero(t, rep.Crashes, "--crash-prob 0 crashes nobody")

	// The C1/C2 race needs preemptions: with none, every schedule is safe.
	out, _, err = run(t, "explore", "--backend", "process", "-s", "setnx-del", "-x", "stale-recovery", "--preemptions", "0")
	require.NoError(t, err)
	assert.Contains(t, out, "stale-recovery on setnx-del: SAFE after ")
	assert.Contains(t, out, ", all schedules within the bound")

	// The deadlock needs a crash, a fault: with none, there is none.
	out, _, err = run(t, "explore", "--backend", "process", "-s", "incr-expire", "-x", "crash-before-expire", "--faults", "0")
	require.NoError(t, err)
	assert.Contains(t, out, "crash-before-expire on incr-expire: SAFE after ")
}

// TestIncompleteIsNotSafe: a search cut short by --max-schedules headlines
// INCOMPLETE and says why, never SAFE. set-nx-px has no counterexample in
// stale-recovery, whose bound holds 117 schedules: 50 are not all of them.
func TestIncompleteIsNotSafe(t *testing.T) {
	out, _, err := run(t, "explore", "--backend", "process", "-s", "set-nx-px", "-x", "stale-recovery", "--max-schedules", "50", "--workers", "1")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^stale-recovery on set-nx-px: INCOMPLETE after 50 schedules in .*, not every schedule within the bound: --max-schedules 50 reached( \(.*: docs/reduction\.md\))?$`, out)
	assert.NotContains(t, out, "SAFE")

	out, _, err = run(t, "explore", "--backend", "process", "-s", "set-nx-px", "-x", "stale-recovery", "--max-schedules", "5", "--workers", "1", "--json")
	require.NoError(t, err)
	var res struct {
		Complete bool
		Headline string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.False(t, res.Complete)
	assert.Equal(t, "INCOMPLETE", res.Headline, "the JSON carries the headline too")
}

// TestDemoMermaidIsAFile: demo --mermaid writes the diagram alone on
// stdout, so that "> x.mmd" is a Mermaid file; the notes go to stderr.
func TestDemoMermaidIsAFile(t *testing.T) {
	out, errOut, err := run(t, "demo", "stale-recovery", "--backend", "process", "-s", "setnx-del", "--mermaid")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "sequenceDiagram\n"), out)
	statement := regexp.MustCompile(`^    (participant |Note |c\d+-{1,2}>>n\d+: |n\d+-{1,2}>>c\d+: )`)
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n")[1:] {
		assert.Regexp(t, statement, l)
	}
	assert.Contains(t, out, "VIOLATION: c1 and c2 hold the lock at once")
	assert.Contains(t, errOut, "Redis: process")
	assert.Contains(t, errOut, "== stale-recovery on setnx-del: VIOLATED")
}

// TestInterruptExits130: Ctrl-C ends a run with status 130, once it has
// removed the servers it started.
func TestInterruptExits130(t *testing.T) {
	tmp := t.TempDir()
	var stderr lockedBuffer
	cmd := exec.Command(os.Args[0], "stress", "--backend", "process", "-s", "set-nx-px", "--duration", "1m")
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "TMPDIR="+tmp)
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "Redis: process") }, time.Minute, 10*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, stderr.String())
		assert.Equal(t, 130, exit.ExitCode(), stderr.String())
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("no exit within a minute of SIGINT\n%s", stderr.String())
	}
	assert.Empty(t, leftovers(t, nil, cmd.Process.Pid, tmp))
	assert.NotContains(t, stderr.String(), "locklab: ", "an interrupt is not an error")
}
