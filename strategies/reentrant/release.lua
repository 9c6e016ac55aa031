-- hash-reentrant release: leave once; the last exit deletes the lock and
-- publishes the release for the waiters of a Notifier.
-- KEYS[1]  the lock key
-- ARGV[1]  the holder's id
-- ARGV[2]  the channel to publish on (locklab:released:<key>)
-- Returns the entries left (0: the lock was deleted), or false when the
-- lock is gone or another holder's.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return false
end
local n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if n > 0 then
  return n
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[2], '1')
return 0
