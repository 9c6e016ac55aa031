package etcdlock_test

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

// etcdOrGRPC keeps the packages of etcd's modules and of gRPC.
func etcdOrGRPC(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		if strings.HasPrefix(p, "go.etcd.io/") || p == "google.golang.org/grpc" || strings.HasPrefix(p, "google.golang.org/grpc/") {
			out = append(out, p)
		}
	}
	return out
}

// TestRedisServicesLinkNoEtcd: a service that imports locklab and its
// registry, and not this package, links neither etcd's client nor gRPC.
func TestRedisServicesLinkNoEtcd(t *testing.T) {
	all := deps(t, "github.com/locklab/locklab", "github.com/locklab/locklab/strategies")
	require.Contains(t, all, "github.com/locklab/locklab/strategies", "go list answered for the packages asked")
	assert.Empty(t, etcdOrGRPC(all), "locklab and strategies must not import etcd or gRPC")
	assert.NotContains(t, all, "github.com/locklab/locklab/strategies/etcdlock")
	// The check can fail: this package links both.
	mine := etcdOrGRPC(deps(t, "github.com/locklab/locklab/strategies/etcdlock"))
	assert.Contains(t, mine, "go.etcd.io/etcd/client/v3")
	assert.Contains(t, mine, "google.golang.org/grpc")
}
