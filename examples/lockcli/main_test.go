package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/cli"
)

// TestExplore runs "explore" on the lock, as "go run . explore" does, on
// redis-server processes: its release deletes the next holder's lock.
func TestExplore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := cli.Run(ctx, []string{"explore", "--backend", "process", "--strategy", "get-then-del",
		"--scenario", "release-after-expiry", "--fail-on-violation"}, &out, &errb)
	if code != 1 {
		t.Fatalf("status %d, want 1 (a violation found): %s%s", code, out.String(), errb.String())
	}
	if want := "c1's release deleted c2's lock"; !strings.Contains(out.String(), want) {
		t.Errorf("no %q in:\n%s", want, out.String())
	}
}
