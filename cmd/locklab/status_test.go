package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStatusOnlyOnATerminal: progress is written, and rewritten in place,
// on a terminal only; a file or a pipe gets nothing.
func TestStatusOnlyOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	s := newStatus(&buf)
	s.set("%d cells", 3)
	s.clear()
	require.Empty(t, buf.String(), "a buffer is no terminal")

	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	s = newStatus(f)
	s.set("%d cells", 3)
	s.clear()
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.Empty(t, b, "a file is no terminal")

	s = &status{w: &buf, tty: true}
	s.clear()
	require.Empty(t, buf.String(), "nothing shown, nothing to clear")
	s.set("%d cells", 3)
	s.set("%d cells", 4)
	s.clear()
	require.Equal(t, "\r\033[K3 cells\r\033[K4 cells\r\033[K", buf.String())
}
