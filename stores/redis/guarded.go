// The guarded write of the Scenario.Guarded scenarios on Redis: a key of
// the resource beside the lock's, written by a script that sets it only
// while the lock key still holds the writer's token, as the Redis
// distributed locks page has the release compare the token in a script.
// Redis runs a script whole, with no other command between its reads and
// its write. The guard is as good as the token: one every holder writes
// alike (INCR's 1, LOCK_FOREVER) cannot tell them apart.

package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/harness"
)

// What each Redis lock hands its user that the guarded write checks
// (harness.Driver.Guards), or why it hands nothing.
const (
	guardToken = "the lock key and the random token the lock wrote there (Lease.Key, Lease.Token): the script " +
		"writes only while GET key returns the token"
	guardStamp = "the lock key and the expiry stamp the lock wrote there (Lease.Token: Unix ms + TTL + 1), " +
		"which the script compares as a token: two holders tell apart unless they stamp the same millisecond"
	guardForever = "the lock key and its value, LOCK_FOREVER (Lease.Token), the same for every holder: the " +
		"script's compare tells no holder from another (and no TTL ever frees the lock)"
	guardCounter = "the lock key and the counter INCR returned (Lease.Token), 1 for every holder: the script's " +
		"compare tells no holder from another"
	guardField = "the lock's hash and the holder's field in it (Lease.Token: the client's id and owner): the " +
		"script writes only while HEXISTS key field"
	unguardedRedlock = "Redlock's lock is a majority of independent masters: no one master's key says who holds " +
		"it. A script on one master, guarded by that master's key alone, refuses a holder whose majority misses " +
		"that master and lets through one whose key there outlived its majority: the guard is the lock's " +
		"majority, which no one atomic request can check"
)

// guards are the Redis strategies' guards, by strategy.
var guards = map[string]string{
	"set-nx-px": guardToken, "set-nx-px-del": guardToken, "set-nx-px-getdel": guardToken, "set-nx-px-wait": guardToken,
	"setnx-expire": guardToken, "setnx-expire-always": guardToken,
	"setnx-del": guardStamp, "setnx-getset": guardStamp, "setnx-getset-lua": guardStamp,
	"setnx-forever": guardForever,
	"incr-expire":   guardCounter, "incr-expire-lua": guardCounter, "incr-expire-multi": guardCounter,
	"hash-reentrant": guardField,
}

// guardScript sets KEYS[2] to ARGV[2] only while the lock key KEYS[1]
// holds the token ARGV[1]: its value (a string), or a field of it (a
// re-entrant lock's hash). It returns 1 when it wrote, 0 when not.
var guardScript = redis.NewScript(2, `
local t = redis.call('type', KEYS[1])['ok']
local held = false
if t == 'string' then
  held = redis.call('get', KEYS[1]) == ARGV[1]
elseif t == 'hash' then
  held = redis.call('hexists', KEYS[1], ARGV[1]) == 1
end
if not held then
  return 0
end
redis.call('set', KEYS[2], ARGV[2])
return 1`)

// resourceKey is the key of the resource of the lock on key: beside it,
// with its namespace's tag where it has one.
func resourceKey(key string) string { return key + ":resource" }

var _ harness.Guarded = (*redisStore)(nil)

// PrepareGuarded sets the resource of key afresh on the first node,
// outside the schedule.
func (s *redisStore) PrepareGuarded(ctx context.Context, key string) error {
	c, err := s.pool(0).GetContext(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	k := resourceKey(s.Key(key))
	if _, err := redis.DoContext(c, ctx, "SET", k, "0"); err != nil {
		return fmt.Errorf("setting %s on %s: %w", k, s.nodes[0].Name(), err)
	}
	s.note([]any{k}, nil)
	return nil
}

// ReadGuard returns the guard the lease carries: the lock key and the
// holder's token. It reads nothing.
func (s *redisStore) ReadGuard(_ context.Context, c *harness.Client, lease locklab.Lease) (harness.Guard, error) {
	if lease.Key == "" || lease.Token == "" {
		return harness.Guard{}, fmt.Errorf("the lease names no key and token (key %q, token %q)", lease.Key, lease.Token)
	}
	return harness.Guard{Key: lease.Key, Token: lease.Token, Show: "c" + strconv.Itoa(c.ID()) + "'s token"}, nil
}

// WriteGuarded runs guardScript on client c's connection to the first
// node: a step of c's. It reports whether the script wrote.
func (s *redisStore) WriteGuarded(ctx context.Context, c *harness.Client, g harness.Guard) (harness.Guard, bool, error) {
	conn, err := s.source(c, 1).GetContext(ctx)
	if err != nil {
		return g, false, err
	}
	defer conn.Close()
	n, err := redis.Int(guardScript.DoContext(ctx, conn, g.Key, resourceKey(g.Key), g.Token, "c"+strconv.Itoa(c.ID())))
	if err != nil {
		return g, false, err
	}
	return g, n == 1, nil
}
