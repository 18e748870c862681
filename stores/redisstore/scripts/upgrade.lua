-- upgrade brings a store of key layout 1 (or one from before version
-- keys), 2 or 3 to layout 4 in place, in one atomic change, and marks the
-- prefix with the version; on a fresh prefix it only marks it, and on a
-- store of layout 4 it does nothing.
--
-- Layout 2 keeps every key of layout 1, whose ready and lease sets are
-- the default queue's at priority 0, where the runs of layout 1 stay; it
-- adds what layout 1 lacked: the finished indexes by end (Purge), the
-- started flag of runs claimed already (a queue's rate) and each run's
-- set of topics with buffered events (Purge), found by a SCAN of the
-- prefix's event lists, once. Layout 3 keeps every key of layout 2; its
-- queues' sets of queued runs (qf:<queue>) hold every queued run, where
-- layout 2's held those queued before they were due, so the queued runs
-- not there yet go in (QueueStats' oldest ready run). Layout 4 keeps
-- every key of layout 3 and adds the indexes of runs by creation, all
-- runs' (ic) and each workflow's (icw:<wf>), which every run goes in
-- (ListRuns in storage.OrderCreated); a run stored before search
-- attributes has none, so their indexes need nothing.
-- KEYS[1]: the version key.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: the version to write, ARGV[4]:
-- the prefix escaped for a SCAN pattern.
-- Reply: {OK, the version found ("" for none)} | {VERSION, the version
-- found} when it is none of 1, 2, 3 and the new one.
local function main()
  local v = redis.call('GET', KEYS[1])
  if v == ARGV[3] then return {'OK', v} end
  if v and v ~= '1' and v ~= '2' and v ~= '3' then return {'VERSION', v} end
  if not v and redis.call('EXISTS', idx_all()) == 0 then
    -- a fresh prefix (or one with only a catalog): nothing to bring over
    redis.call('SET', KEYS[1], ARGV[3])
    return {'OK', ''}
  end
  if v ~= '2' and v ~= '3' then
    for _, st in ipairs({'complete', 'errored', 'terminated'}) do
      for _, id in ipairs(redis.call('ZRANGE', idx_st(st), 0, -1)) do
        local wf, ea = unpack(redis.call('HMGET', rkey(id), 'wf', 'ea'))
        if wf then
          ea = ea or '0'
          redis.call('ZADD', fin_st(st), ea, id)
          redis.call('ZADD', fin_wf_st(st, wf), ea, id)
        end
      end
    end
    for _, st in ipairs({'running', 'waiting'}) do
      for _, id in ipairs(redis.call('ZRANGE', idx_st(st), 0, -1)) do
        redis.call('HSET', rkey(id), 'sd', '1')
      end
    end
    local base = #P + 3
    local cursor = '0'
    repeat
      local res = redis.call('SCAN', cursor, 'MATCH', ARGV[4] .. 'e:*', 'COUNT', 1000)
      cursor = res[1]
      for _, k in ipairs(res[2]) do
        local n, rest = string.match(string.sub(k, base), '^(%d+):(.*)$')
        if n then
          n = tonumber(n)
          local id, topic = string.sub(rest, 1, n), string.sub(rest, n + 2)
          redis.call('SADD', evtopics(id), topic)
        end
      end
    until cursor == '0'
  end
  if v ~= '3' then
    -- every queued run in its queue's set of queued runs (a run of
    -- layout 1 is the default queue's)
    for _, id in ipairs(redis.call('ZRANGE', idx_st('queued'), 0, -1)) do
      local r = rkey(id)
      local ready, qu, qf = unpack(redis.call('HMGET', r, 'ready', 'qu', 'qf'))
      if ready and not qf then
        redis.call('ZADD', queuedq(qu or 'default'), ready, id)
        redis.call('HSET', r, 'qf', '1')
      end
    end
  end
  -- every run in the indexes by creation
  for _, id in ipairs(redis.call('ZRANGE', idx_all(), 0, -1)) do
    local wf, ca = unpack(redis.call('HMGET', rkey(id), 'wf', 'ca'))
    if wf and ca then
      redis.call('ZADD', idx_created(), ca, id)
      redis.call('ZADD', idx_wf_created(wf), ca, id)
    end
  end
  redis.call('SET', KEYS[1], ARGV[3])
  return {'OK', v or ''}
end
