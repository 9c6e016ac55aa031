-- set-nx-px reclaim: delete a fence counter without letting its numbers go
-- back: its last number is folded into the floor of its hash slot, above
-- which a counter that is not there starts.
-- KEYS[1]  the fence counter (FenceKey)
-- KEYS[2]  the floor of its slot's counters (FloorKey)
-- Returns the counter's last number, or 0 when there was no counter. A
-- counter or floor that is not an integer fails it before anything changes.
local function int(v) return string.match(v, '^%-?%d+$') ~= nil end
local n = redis.call('get', KEYS[1])
if not n then return 0 end
local f = redis.call('get', KEYS[2])
if not int(n) or (f and not int(f)) then
  return redis.error_reply('WRONGTYPE the fence counter ' .. KEYS[1] .. ' or its floor is not an integer')
end
if not f or tonumber(n) > tonumber(f) then
  redis.call('set', KEYS[2], n)
end
redis.call('del', KEYS[1])
return tonumber(n)
