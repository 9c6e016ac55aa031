// Package memcli_test runs locklab's command line, in this process, with
// the store made for the tests imported: a program that calls cli.Main
// with memstore's blank import gets its strategies in every command.
package memcli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/locklab/locklab/cli"
	_ "github.com/locklab/locklab/harness/harnesstest/memstore" // the one import: the store and its strategies
)

// TestCLIMatrixRunsTheFifthStore: `locklab matrix` on the store's two
// strategies starts its server through its Driver (as it starts every
// registered store's: stores.Start), and its cells get their verdicts:
// mem-del's release deletes its successor's lock on release-after-expiry,
// where mem-cas's does not.
func TestCLIMatrixRunsTheFifthStore(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), []string{"matrix", "-s", "mem-cas,mem-del", "-x", "release-after-expiry",
		"--backend", "process"}, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		"memstore: an in-process server on 127.0.0.1:",
		"mem-cas × release-after-expiry: SAFE",
		"mem-del × release-after-expiry: VIOLATED",
		"mem-del × release-after-expiry: VIOLATED (release)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}
