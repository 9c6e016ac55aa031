-- setnx-getset-lua release: the SETNX page's remedy for the release of an
-- expired lock, "GET the lock's timestamp, and DEL only when it is still
-- the holder's own", run with EVAL so that nothing comes between the two.
-- KEYS[1]  the lock key
-- ARGV[1]  the stamp the holder wrote at acquire
-- Returns 1 when the holder's lock was deleted, 0 when the key was gone or
-- holds another stamp.
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
