package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startPlay runs "locklab play" with args until the returned stop is
// called; it returns the URL it printed and its stderr.
func startPlay(t *testing.T, args ...string) (string, *syncBuffer, func() (string, error)) {
	t.Helper()
	var out, errb syncBuffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"play", "--backend", "process"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	re := regexp.MustCompile(`open (http://\S+)`)
	var url string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, "play printed no address: %s %s", out.String(), errb.String())
	stop := func() (string, error) {
		cancel()
		select {
		case err := <-done:
			return out.String(), err
		case <-time.After(30 * time.Second):
			t.Fatal("play did not stop")
			return "", nil
		}
	}
	return url, &errb, stop
}

// TestPlayCommand serves the page on loopback, plays a step, and stops
// cleanly when its context ends (as on Ctrl-C), closing the session.
func TestPlayCommand(t *testing.T) {
	url, errb, stop := startPlay(t, "--http", "127.0.0.1:0", "c1c2")
	assert.True(t, strings.HasSuffix(url, "/#c1c2"), url)
	base := strings.TrimSuffix(url, "#c1c2")
	resp, err := http.Get(base)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Post(base+"api/sessions", "application/json", strings.NewReader(`{"level":"c1c2"}`))
	require.NoError(t, err)
	var r struct {
		Session string `json:"session"`
		Seq     int    `json:"seq"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	resp.Body.Close()
	resp, err = http.Post(base+"api/step", "application/json", strings.NewReader(`{"session":"`+r.Session+`","seq":0,"step":"c3"}`))
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	resp.Body.Close()
	assert.Equal(t, 1, r.Seq)
	assert.NotContains(t, errb.String(), "WARNING", "loopback needs no warning")
	out, err := stop()
	require.NoError(t, err)
	assert.Contains(t, out, "closing every session")
}

// TestPlayWarnsOffLoopback: listening beyond loopback prints a warning.
func TestPlayWarnsOffLoopback(t *testing.T) {
	url, errb, stop := startPlay(t, "--http", "0.0.0.0:0")
	assert.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)
	assert.Contains(t, errb.String(), "WARNING")
	assert.Contains(t, errb.String(), "anyone who can reach this machine")
	_, err := stop()
	require.NoError(t, err)
}

func TestPlayBadInput(t *testing.T) {
	_, _, err := run(t, "play", "--backend", "process", "nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown level "nope"`)
	_, _, err = run(t, "play", "--backend", "process", "--http", "8080")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--http 8080: must be host:port")
	_, _, err = run(t, "play", "--backend", "addrs", "--addr", "127.0.0.1:1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not addrs")
	out, _, err := run(t, "play", "--help")
	require.NoError(t, err)
	for _, s := range []string{"--http", "--max-sessions", "--idle", "c1c2", "127.0.0.1"} {
		assert.Contains(t, out, s)
	}
}

// TestDemoSchedule: demo --schedule replays the schedule play prints.
func TestDemoSchedule(t *testing.T) {
	out, _, err := run(t, "demo", "stale-recovery", "--backend", "process", "-s", "setnx-del", "--schedule", "c3 time c1 c2 c1 c2 c1 c1 c2 c2")
	require.NoError(t, err)
	assert.Contains(t, out, "c1 and c2 hold the lock at once after step 10")
	_, _, err = run(t, "demo", "stale-recovery", "--backend", "process", "-s", "setnx-del", "--schedule", "c1 x(")
	require.Error(t, err)
}

func TestPlayScenarioOnStrategy(t *testing.T) {
	_, _, err := run(t, "play", "--backend", "process", "-s", "setnx-del")
	assert.ErrorContains(t, err, "give the scenario too")
	_, _, err = run(t, "play", "--backend", "process", "redlock-pause", "-s", "setnx-del")
	assert.ErrorContains(t, err, "does not apply")
	url, _, stop := startPlay(t, "--http", "127.0.0.1:0", "clock-skew", "-s", "setnx-del")
	assert.True(t, strings.HasSuffix(url, "/#clock-skew/setnx-del"), url)
	_, err = stop()
	require.NoError(t, err)
}

// children returns the pids of this process's children named etcd or
// postgres (a PostgreSQL postmaster; its backends are its own children).
func children(t *testing.T) map[int]string {
	t.Helper()
	out := map[int]string{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm, rest := s[open+1:end], strings.Fields(s[end+1:])
		if len(rest) < 2 || (comm != "etcd" && comm != "postgres") {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
		if ppid, _ := strconv.Atoi(rest[1]); ppid == os.Getpid() {
			out[pid] = comm
		}
	}
	return out
}

// TestPlayStoreLevelsStop: a session on the etcd level and one on the
// PostgreSQL level start an etcd cluster and a PostgreSQL server of their
// own; when play's context ends (as on Ctrl-C) every one of those
// processes is gone.
func TestPlayStoreLevelsStop(t *testing.T) {
	before := children(t)
	url, _, stop := startPlay(t, "--http", "127.0.0.1:0", "etcd-pause")
	base := strings.TrimSuffix(url, "#etcd-pause")
	for _, level := range []string{"etcd-pause", "pg-restart"} {
		resp, err := http.Post(base+"api/sessions", "application/json", strings.NewReader(`{"level":"`+level+`"}`))
		require.NoError(t, err)
		var r struct {
			Error string `json:"error"`
			Level struct {
				Store string `json:"store"`
			} `json:"level"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, r.Error)
		assert.NotEmpty(t, r.Level.Store, level)
	}
	started := map[string]int{}
	for pid, comm := range children(t) {
		if _, ok := before[pid]; !ok {
			started[comm]++
		}
	}
	// The sessions' servers, and maybe those a hint's exploration started.
	assert.GreaterOrEqual(t, started["etcd"], 3, "three etcd members")
	assert.GreaterOrEqual(t, started["postgres"], 1, "a postmaster")
	out, err := stop()
	require.NoError(t, err)
	assert.Contains(t, out, "closing every session")
	for pid, comm := range children(t) {
		_, old := before[pid]
		assert.True(t, old, "%s (pid %d) is left after play stopped", comm, pid)
	}
}
