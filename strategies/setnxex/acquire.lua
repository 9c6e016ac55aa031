-- set-nx-px acquire: take the lock and draw its fencing number in one step.
-- KEYS[1]  the lock key
-- KEYS[2]  its fence counter (FenceKey: in the lock key's hash slot; never
--          expires)
-- KEYS[3]  the floor of its slot's counters (FloorKey): a counter that is
--          not there starts above it, so a reclaimed one never goes back
-- ARGV[1]  the holder's random token
-- ARGV[2]  the TTL in milliseconds
-- Returns the new fence number when the lock was taken; when it is held, a
-- one-element array with the holder's remaining TTL in milliseconds, so a
-- waiter knows how long it may have to wait. When the counter or the floor
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
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if floor then redis.call('set', KEYS[2], floor) end
  return redis.call('incr', KEYS[2])
end
return {redis.call('pttl', KEYS[1])}
