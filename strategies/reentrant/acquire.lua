-- hash-reentrant acquire, after Redisson's RedissonLock: the lock is a hash
-- whose one field is its holder's id, counting how many times the holder
-- has entered.
-- KEYS[1]  the lock key
-- ARGV[1]  the holder's field (its id and owner)
-- ARGV[2]  the TTL in milliseconds
-- Returns the holder's entry count (1 on a first acquire) when the lock was
-- free or already the holder's, with the TTL reset; when another holder has
-- it, a one-element array with that holder's remaining TTL in milliseconds.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  local n = redis.call('hincrby', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return n
end
return {redis.call('pttl', KEYS[1])}
