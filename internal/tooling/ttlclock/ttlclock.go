// Package ttlclock makes time pass on a Redis server's keys: every TTL is
// shortened at once by a duration, and the keys whose TTL runs out are
// deleted, as if that much time had elapsed on the server's clock. Keys
// without a TTL are untouched. It only sends commands (SCAN, and a Lua
// script per batch of keys; or, for a small database, one script that
// lists the keys itself), so it works on any server a client can reach.
package ttlclock

import (
	"context"
	"time"

	"github.com/gomodule/redigo/redis"
)

// All is a duration past every TTL: Advance(ctx, c, All) expires every key
// that has one.
const All = 1000 * 24 * time.Hour

// advanceLua is a script that shortens the TTL of each key that list (a Lua
// expression) yields by ARGV[1] milliseconds, deleting those whose TTL is
// at most that; it returns how many it deleted.
func advanceLua(list string) string {
	return `
local d = tonumber(ARGV[1])
local n = 0
for _, k in ipairs(` + list + `) do
  local t = redis.call('PTTL', k)
  if t >= 0 then
    if t <= d then redis.call('DEL', k); n = n + 1
    else redis.call('PEXPIRE', k, t - d) end
  end
end
return n`
}

// advanceScript is advanceLua over KEYS.
var advanceScript = redis.NewScript(-1, advanceLua("KEYS"))

// Advance moves the clock of c's current database forward by d and returns
// the number of keys that expired.
func Advance(ctx context.Context, c redis.Conn, d time.Duration) (int, error) {
	expired := 0
	cursor := "0"
	for {
		v, err := redis.Values(redis.DoContext(c, ctx, "SCAN", cursor, "COUNT", 500))
		if err != nil {
			return expired, err
		}
		var keys []string
		if _, err := redis.Scan(v, &cursor, &keys); err != nil {
			return expired, err
		}
		n, err := AdvanceKeys(ctx, c, keys, d)
		if err != nil {
			return expired, err
		}
		expired += n
		if cursor == "0" {
			return expired, nil
		}
	}
}

// advanceAllScript is advanceLua over every key of the database: it
// lists them itself (KEYS, which a script may call on every Redis version,
// writes after it included).
var advanceAllScript = redis.NewScript(0, advanceLua("redis.call('KEYS', '*')"))

// AdvanceFew is Advance in one round trip, for a database that holds a few
// keys only: the script lists them (KEYS) and blocks the server while it
// runs, which on a large database Advance's batches avoid.
func AdvanceFew(ctx context.Context, c redis.Conn, d time.Duration) (int, error) {
	return redis.Int(advanceAllScript.DoContext(ctx, c, d.Milliseconds()))
}

// AdvanceKeys is Advance over the given keys only, in one round trip: for
// a database shared with data that is not the caller's, whose TTLs must not
// move. It returns the number of keys that expired.
func AdvanceKeys(ctx context.Context, c redis.Conn, keys []string, d time.Duration) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	args := make([]any, 0, len(keys)+2)
	args = append(args, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, d.Milliseconds())
	return redis.Int(advanceScript.DoContext(ctx, c, args...))
}
