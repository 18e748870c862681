#!lua flags=no-writes
-- nextwake reads how long until a claim of the workflows in the queues
-- could find a run by time alone (NextWake): the lowest score of their
-- ready and lease sets, at every priority level. An entry out of step
-- with its run (Claim drops those) may make the answer early, never late.
-- KEYS: the ready set and the lease set of each workflow in the first
-- queue at priority 0 (the script builds every key itself).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: the number n of workflows,
-- ARGV[4 .. 3+n]: the workflows, then the queues.
-- Reply: {} when every set is empty, else {microseconds from now, at least 0}.
local function main()
  local nwf = tonumber(ARGV[3])
  local at
  local function head(key)
    local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #h == 2 then
      local s = tonumber(h[2])
      if at == nil or s < at then at = s end
    end
  end
  for qi = 4 + nwf, #ARGV do
    local qu = ARGV[qi]
    for wi = 4, 3 + nwf do
      local wf = ARGV[wi]
      local ln = lane(qu, '0')
      head(readyq(wf, ln))
      head(leaseq(wf, ln))
      for _, p in ipairs(redis.call('ZRANGE', levelset(qu, wf), 0, -1)) do
        ln = lane(qu, p)
        head(readyq(wf, ln))
        head(leaseq(wf, ln))
      end
    end
  end
  if at == nil then return {} end
  local d = at - NOW
  if d < 0 then d = 0 end
  return {f(d)}
end
