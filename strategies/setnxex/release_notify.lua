-- set-nx-px release with notification: compare-and-delete, then publish the
-- release so that waiters blocked in a Notifier wake at once.
-- KEYS[1]  the lock key
-- ARGV[1]  the token the holder wrote at acquire
-- ARGV[2]  the channel to publish on (locklab:released:<key>)
-- Returns 1 when the holder's lock was deleted, 0 when the key was gone or
-- held by another token.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[2], '1')
  return 1
else
  return 0
end
