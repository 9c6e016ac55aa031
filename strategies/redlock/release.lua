-- redlock release, run on every node: compare-and-delete.
-- KEYS[1]  the lock key
-- ARGV[1]  the token the holder wrote at acquire
-- Returns 1 when the holder's key was deleted, 0 when the key was gone or
-- held by another token.
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
else
  return 0
end
