package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/goredis"
	"github.com/locklab/locklab/adapters/internal/adaptertest"
)

// noMaint turns off go-redis's maintenance notifications for the test
// clients. Redis before 8 refuses their handshake, and go-redis (v9.23)
// then switches them off by writing the client's Options, which every
// connection taken with Conn shares, each under a lock of its own: two
// such connections made at once are a data race the race detector
// reports. A client of a server that refuses the handshake loses nothing.
func noMaint() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// client is a go-redis client of one server, as the tests make them.
func client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaintNotificationsConfig: noMaint()})
}

// clusterClient is a go-redis client of a cluster, as the tests make them.
func clusterClient(addrs []string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaintNotificationsConfig: noMaint()})
}

func newSource(tb testing.TB, addr string) locklab.ConnSource {
	c := client(addr)
	tb.Cleanup(func() { c.Close() })
	return goredis.New(c)
}

func TestAdapter(t *testing.T) {
	adaptertest.Run(t, newSource)
}
