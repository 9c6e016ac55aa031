-- set-nx-px migrate: raise a fence counter to the number an earlier version
-- kept for its key in the hash locklab:fences.
-- KEYS[1]  the fence counter (FenceKey)
-- ARGV[1]  the number the hash held
-- Returns the counter's number afterwards, the larger of the two.
local function int(v) return string.match(v, '^%-?%d+$') ~= nil end
local n = redis.call('get', KEYS[1])
if not int(ARGV[1]) or (n and not int(n)) then
  return redis.error_reply('WRONGTYPE the fence counter ' .. KEYS[1] .. ' or the number to move is not an integer')
end
if not n or tonumber(ARGV[1]) > tonumber(n) then
  redis.call('set', KEYS[1], ARGV[1])
  return tonumber(ARGV[1])
end
return tonumber(n)
