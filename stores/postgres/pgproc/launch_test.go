package pgproc

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunEndsWhatTheToolForked: a program run to its end (pg_basebackup)
// that forked a process keeping its output open, as pg_basebackup's WAL
// streamer does, is ended with that process when the context is, and run
// returns: the child does not hold it.
func TestRunEndsWhatTheToolForked(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := "#!/bin/sh\nsleep 60 &\necho $! > " + pidFile + "\nsleep 60\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "forker"), []byte(script), 0o755))
	s := &Server{BinDir: dir, Dir: dir}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := s.run(ctx, "forker")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(began), 10*time.Second, "run waited for the forked process")

	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.Error(t, syscall.Kill(pid, 0), "the forked process %d outlived the run", pid)
}
