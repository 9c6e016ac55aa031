-- set-nx-px handoff: pass a held lock straight to a successor, so the key
-- never falls free between a release and the next acquire.
-- KEYS[1]  the lock key
-- KEYS[2]  the hash of fence counters (field: the lock key)
-- ARGV[1]  the current holder's token
-- ARGV[2]  the successor's token
-- ARGV[3]  the successor's TTL in milliseconds
-- Returns the successor's fence number, or false when the current holder's
-- lock is gone (nothing is changed then). When the counters' key is not a
-- hash, it fails before writing anything.
local t = redis.call('type', KEYS[2])['ok']
if t ~= 'hash' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the fence counters key ' .. KEYS[2] .. ' holds a ' .. t .. ', not a hash')
end
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return redis.call('hincrby', KEYS[2], KEYS[1], 1)
end
return false
