package zkproc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const portsHelperEnv = "LOCKLAB_ZKPROC_PORTS_HELPER"

// TestHelperPorts is not a test: TestPortsReserved runs it in a process
// of its own, which reserves the port it is given, says so, and waits.
func TestHelperPorts(t *testing.T) {
	p, err := strconv.Atoi(os.Getenv(portsHelperEnv))
	if err != nil {
		t.Skip("helper process of TestPortsReserved")
	}
	fmt.Println("reserved", reserve(p))
	select {}
}

// TestPortsReserved: the ports picked are distinct, below the ephemeral
// range, and reserved: in this process until released, and against
// another process until it is gone.
func TestPortsReserved(t *testing.T) {
	ports, err := freePorts(9)
	require.NoError(t, err)
	lo, hi := portRange()
	seen := map[int]bool{}
	for _, p := range ports {
		assert.False(t, seen[p], "distinct")
		seen[p] = true
		if hi > lo {
			assert.True(t, p >= lo && p < hi, "%d in [%d, %d)", p, lo, hi)
		}
		assert.False(t, reserve(p), "%d is held", p)
	}
	release(ports)
	require.True(t, reserve(ports[0]), "released")
	release(ports[:1])

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPorts$")
	cmd.Env = append(os.Environ(), portsHelperEnv+"="+strconv.Itoa(ports[0]))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	require.True(t, sc.Scan())
	require.Equal(t, "reserved true", sc.Text())
	assert.False(t, reserve(ports[0]), "held by the other process")
	cmd.Process.Kill()
	cmd.Wait()
	assert.True(t, reserve(ports[0]), "free once it is gone")
	release(ports[:1])
}
