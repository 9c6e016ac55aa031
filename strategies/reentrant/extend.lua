-- hash-reentrant extend, the renewal Redisson's watch dog sends: reset the
-- TTL when the lock is still the holder's. It never re-creates a lapsed lock.
-- KEYS[1]  the lock key
-- ARGV[1]  the holder's field (its id and owner)
-- ARGV[2]  the new TTL in milliseconds
-- Returns 1 when the TTL was reset, 0 when the lock is gone or not ours.
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
