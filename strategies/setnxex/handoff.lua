-- set-nx-px handoff: pass a held lock straight to a successor, so the key
-- never falls free between a release and the next acquire.
-- KEYS[1]  the lock key
-- KEYS[2]  its fence counter (FenceKey)
-- KEYS[3]  the floor of its slot's counters (FloorKey)
-- ARGV[1]  the current holder's token
-- ARGV[2]  the successor's token
-- ARGV[3]  the successor's TTL in milliseconds
-- Returns the successor's fence number, or false when the current holder's
-- lock is gone (nothing is changed then). When the counter or the floor
-- holds anything but an integer, it fails before writing anything.
local function number(k)
  local t = redis.call('type', k)['ok']
  if t == 'none' then return false end
  local v = t == 'string' and redis.call('get', k)
  if not v or not (v == '0' or (#v < 19 and string.match(v, '^%-?[1-9]%d*$'))) then
    return nil, redis.error_reply('WRONGTYPE the fence counter key ' .. k .. ' holds a ' .. t .. ', not an integer')
  end
  return v
end
local n, err = number(KEYS[2])
if err then return err end
local floor = false
if not n then
  floor, err = number(KEYS[3])
  if err then return err end
end
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
  if floor then redis.call('set', KEYS[2], floor) end
  return redis.call('incr', KEYS[2])
end
return false
