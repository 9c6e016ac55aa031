package pglock_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deps lists the packages pkgs import, directly or not, as go list -deps
// does (tests excluded: what a program that imports pkgs links).
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to list dependencies")
	out, err := exec.Command(goBin, append([]string{"list", "-deps"}, pkgs...)...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list -deps %v: %v\n%s", pkgs, err, ee.Stderr)
	}
	require.NoError(t, err)
	return strings.Fields(string(out))
}

func jackc(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		if strings.HasPrefix(p, "github.com/jackc/") {
			out = append(out, p)
		}
	}
	return out
}

// TestRedisServicesLinkNoPgx: a service that imports locklab and its
// registry, and not this package, links no pgx.
func TestRedisServicesLinkNoPgx(t *testing.T) {
	all := deps(t, "github.com/locklab/locklab", "github.com/locklab/locklab/strategies")
	require.Contains(t, all, "github.com/locklab/locklab/strategies", "go list answered for the packages asked")
	assert.Empty(t, jackc(all), "locklab and strategies must not import pgx")
	assert.NotContains(t, all, "github.com/locklab/locklab/strategies/pglock")
	// The check can fail: this package does link pgx.
	assert.NotEmpty(t, jackc(deps(t, "github.com/locklab/locklab/strategies/pglock")))
}
