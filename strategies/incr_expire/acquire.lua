-- incr-expire-lua acquire: the script of "Redis实现分布式全局锁" as quoted in
-- the INCR + EXPIRE article, which sets the TTL only when INCR returned 1.
-- KEYS[1]  the lock key
-- ARGV[1]  the TTL in milliseconds (the original passed it as KEYS[2]; it is
--          an argument, not a key, so it moves to ARGV here)
-- Returns the counter after INCR: 1 means the lock was acquired.
local key     = KEYS[1]
local ttl     = ARGV[1]

local lockSet = redis.call('incr', key)

if lockSet == 1 then
  redis.call('pexpire', key, ttl)
end

return lockSet
