package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/adapters/goredis"
	"github.com/locklab/locklab/internal/adaptertest"
)

func newSource(tb testing.TB, addr string) locklab.ConnSource {
	c := redis.NewClient(&redis.Options{Addr: addr})
	tb.Cleanup(func() { c.Close() })
	return goredis.New(c)
}

func TestAdapter(t *testing.T) {
	adaptertest.Run(t, newSource)
}
