package zklock_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/internal/tooling/golist"
)

// zookeeper keeps the packages of go-zookeeper's module.
func zookeeper(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		if strings.HasPrefix(p, "github.com/go-zookeeper/") {
			out = append(out, p)
		}
	}
	return out
}

// TestRedisServicesLinkNoZooKeeper: a service that imports locklab and
// its registry, and not this package, links no ZooKeeper client.
func TestRedisServicesLinkNoZooKeeper(t *testing.T) {
	all := golist.Deps(t, "github.com/locklab/locklab", "github.com/locklab/locklab/strategies")
	require.Contains(t, all, "github.com/locklab/locklab/strategies", "go list answered for the packages asked")
	assert.Empty(t, zookeeper(all), "locklab and strategies must not import go-zookeeper")
	assert.NotContains(t, all, "github.com/locklab/locklab/strategies/zklock")
	// The check can fail: this package links it.
	assert.Contains(t, zookeeper(golist.Deps(t, "github.com/locklab/locklab/strategies/zklock")), "github.com/go-zookeeper/zk")
}
