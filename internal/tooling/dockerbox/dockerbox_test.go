package dockerbox

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/procid"
)

func TestParseProcs(t *testing.T) {
	ps := parseProcs("1 (docker-init) S 0 1 1 0 -1;7 (sh) S 1 7 7 0 -1;" +
		"9 (postgres) T 7 9 7 0 -1;12 (postgres) Z 9 9 7 0;garbage;13 (a (b) c) R 9 9 7;")
	assert.Equal(t, []procid.Proc{
		{Pid: 1, PPid: 0, Comm: "docker-init", State: "S"},
		{Pid: 7, PPid: 1, Comm: "sh", State: "S"},
		{Pid: 9, PPid: 7, Comm: "postgres", State: "T"},
		{Pid: 12, PPid: 9, Comm: "postgres", State: "Z"},
		{Pid: 13, PPid: 9, Comm: "a (b) c", State: "R"},
	}, ps)
	assert.Empty(t, parseProcs(""))
}

func TestNetworkName(t *testing.T) {
	a, b := NetworkName("etcd"), NetworkName("etcd")
	assert.Regexp(t, `^locklab-\d+-[0-9a-f]{8}-etcd$`, a)
	assert.NotEqual(t, a, b, "each network its own name")
	assert.Regexp(t, `^locklab-\d+-[0-9a-f]{8}$`, NetworkName(""))
	assert.Regexp(t, `-postgres-TestX-sub$`, NetworkName("postgres-TestX/sub"))
}

// testBox runs a supervised container of an image built here from the
// host's /bin/sh (and its sleep), on a network of its own, both removed
// when the test ends. The test is skipped with -short, or without an
// engine.
func testBox(t *testing.T) (*Network, *Container) {
	if testing.Short() {
		t.Skip("a container of an image built here: the full run's (CI, make test-long)")
	}
	if _, err := Connect(context.Background()); err != nil {
		t.Skipf("docker: %v", err)
	}
	ctx := context.Background()
	n, err := NewNetwork(ctx, "dockerbox", t.Name())
	require.NoError(t, err)
	t.Cleanup(func() { n.Remove() })
	img := Image{Tag: "locklab/dockerbox-test:1", Files: map[string]string{"/bin/sleep": "/bin/sleep"}}
	require.NoError(t, Ensure(ctx, n.Pool.Client, img))
	c, err := n.Run(ctx, Spec{Name: "box", Image: img.Tag, User: User + ":" + User})
	require.NoError(t, err)
	t.Cleanup(func() { c.Remove() })
	return n, c
}

// TestSupervisedContainer: a container of an image built here from the
// host's /bin/sh (and its sleep), its supervisor starting, signalling and
// killing a server, and a Remove that leaves nothing.
func TestSupervisedContainer(t *testing.T) {
	ctx := context.Background()
	n, c := testBox(t)
	assert.Equal(t, n.Name+"-box", c.Name)
	assert.NotEmpty(t, c.IP)

	_, err := c.Start(ctx, "sleep", "with space")
	require.Error(t, err, "the supervisor splits on spaces")
	pid, err := c.Start(ctx, "sleep", "600")
	require.NoError(t, err)
	alive, err := c.Alive(ctx)
	require.NoError(t, err)
	assert.True(t, alive)
	// The server's pid is the shell's child, which execs sleep soon
	// after (as a server's start is awaited before a fault).
	comm := func() (comm, state string) {
		ps, err := c.Procs(ctx)
		require.NoError(t, err)
		for _, p := range ps {
			if p.Pid == pid {
				return p.Comm, p.State
			}
		}
		return "", ""
	}
	for i := 0; i < 100; i++ {
		if cm, _ := comm(); cm == "sleep" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, c.Do(ctx, "signal STOP "+strconv.Itoa(pid), nil))
	// A signal is delivered after kill returns: the state changes soon.
	cm, st := comm()
	for i := 0; i < 100 && st != "T"; i++ {
		time.Sleep(10 * time.Millisecond)
		cm, st = comm()
	}
	assert.Equal(t, "sleep", cm)
	assert.Equal(t, "T", st, "stopped")
	require.Error(t, c.Do(ctx, "signal CONT 99999", nil), "no such process")
	require.NoError(t, c.Do(ctx, "kill", nil))
	alive, err = c.Alive(ctx)
	require.NoError(t, err)
	assert.False(t, alive, "killed, and waited for")
	require.NoError(t, c.Do(ctx, "run sleep 0", nil))
	err = c.Do(ctx, "run sleep x", nil)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "failed: "), err.Error())

	require.NoError(t, c.Remove())
	require.NoError(t, c.Remove(), "twice")
	require.NoError(t, n.Remove())
	cs, ns, err := Owned(ctx, os.Getpid(), t.Name())
	require.NoError(t, err)
	assert.Empty(t, cs)
	assert.Empty(t, ns)
}
