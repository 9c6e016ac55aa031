package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatusInPlaceOnATerminal: on a terminal each update replaces the
// last, and clear removes it.
func TestStatusInPlaceOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	s := &status{w: &buf, tty: true}
	s.clear()
	require.Empty(t, buf.String(), "nothing shown, nothing to clear")
	s.set("%d cells", 3)
	s.set("%d cells", 4)
	s.clear()
	require.Equal(t, "\r\033[K3 cells\r\033[K4 cells\r\033[K", buf.String())
}

// TestStatusPlainElsewhere: a file gets the first update as a line at once,
// then at most one every plainEvery, and no terminal escapes.
func TestStatusPlainElsewhere(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	s := newStatus(f)
	require.False(t, s.tty, "a file is no terminal")
	s.set("%d cells", 1)
	s.set("%d cells", 2) // within plainEvery of the first: left out
	s.last = s.last.Add(-plainEvery)
	s.set("%d cells", 3)
	s.clear()
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.Equal(t, "1 cells\n3 cells\n", string(b))

	var buf bytes.Buffer
	s = newStatus(&buf)
	s.set("x")
	require.Equal(t, "x\n", buf.String(), "a buffer is no terminal either")
	require.WithinDuration(t, time.Now(), s.last, time.Minute)
}
