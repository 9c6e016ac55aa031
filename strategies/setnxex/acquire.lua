-- set-nx-px acquire: take the lock and draw its fencing number in one step.
-- KEYS[1]  the lock key
-- KEYS[2]  the hash of fence counters (field: the lock key; never expires)
-- ARGV[1]  the holder's random token
-- ARGV[2]  the TTL in milliseconds
-- Returns the new fence number when the lock was taken; when it is held, a
-- one-element array with the holder's remaining TTL in milliseconds, so a
-- waiter knows how long it may have to wait. When the counters' key is not a
-- hash, it fails before writing anything.
local t = redis.call('type', KEYS[2])['ok']
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the fence counters key ' .. KEYS[2] .. ' holds a ' .. t .. ', not a hash')
end
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('hincrby', KEYS[2], KEYS[1], 1)
end
return {redis.call('pttl', KEYS[1])}
