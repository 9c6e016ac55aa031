-- hash-reentrant release, after Redisson's unlock: leave once; while
-- entries remain, reset the TTL to the holder's lease; the last exit
-- deletes the lock and publishes the release for the waiters of a Notifier.
-- KEYS[1]  the lock key
-- ARGV[1]  the holder's field
-- ARGV[2]  the channel to publish on (locklab:released:<key>)
-- ARGV[3]  the lease to renew a partial exit to, in milliseconds (0: none)
-- Returns the entries left (0: the lock was deleted), or false when the
-- lock is gone or another holder's.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return false
end
local n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if n > 0 then
  if tonumber(ARGV[3]) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[3])
  end
  return n
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[2], '1')
return 0
