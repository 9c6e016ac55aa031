-- redlock extend, run on every node: compare-and-PEXPIRE. A key that has
-- lapsed is not re-created.
-- KEYS[1]  the lock key
-- ARGV[1]  the token the holder wrote at acquire
-- ARGV[2]  the new TTL in milliseconds
-- Returns 1 when the TTL was reset, 0 when the key was gone or held by
-- another token.
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
else
  return 0
end
