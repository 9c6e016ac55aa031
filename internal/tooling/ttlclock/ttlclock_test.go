package ttlclock

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab/internal/tooling/redistest"
)

// Advance and AdvanceFew shorten the TTLs by the same amount, expire the
// same keys, and leave keys without a TTL alone.
func TestAdvanceFewMatchesAdvance(t *testing.T) {
	srv := redistest.StartOne(t)
	c := srv.Pool.Get()
	defer c.Close()
	ctx := context.Background()
	for _, advance := range []func(context.Context, redis.Conn, time.Duration) (int, error){Advance, AdvanceFew} {
		if _, err := c.Do("FLUSHDB"); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range [][]any{{"a", "1", "PX", 5000}, {"b", "1", "PX", 20000}, {"c", "1"}} {
			if _, err := c.Do("SET", cmd...); err != nil {
				t.Fatal(err)
			}
		}
		n, err := advance(ctx, c, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("expired %d keys, want 1", n)
		}
		if ex, _ := redis.Int(c.Do("EXISTS", "a")); ex != 0 {
			t.Error("a (5s left) survived 10s")
		}
		if ttl, _ := redis.Int64(c.Do("PTTL", "b")); ttl <= 9000 || ttl > 10000 {
			t.Errorf("b: PTTL %dms after 10s of its 20s, want about 10000", ttl)
		}
		if ttl, _ := redis.Int64(c.Do("PTTL", "c")); ttl != -1 {
			t.Errorf("c: PTTL %d, want -1 (no TTL, untouched)", ttl)
		}
	}
}
