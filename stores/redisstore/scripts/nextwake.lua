#!lua flags=no-writes
-- nextwake reads how long until a claim of the workflows in the queues
-- could find a run by time alone (NextWake): the lowest score of their
-- ready and lease sets, at every priority level, of the versions a claim
-- would read (see claim.lua). An entry out of step with its run (Claim
-- drops those) may make the answer early, never late.
-- KEYS: the ready set and the lease set of each workflow in the first
-- queue at priority 0 and version 0 (the script builds every key itself).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: the number n of workflows,
-- then per workflow its name, the number k of its versions (-1 for any)
-- and those k versions; then the queues.
-- Reply: {} when every set is empty, else {microseconds from now, at least 0}.
local function main()
  local wfs, i = read_workflows(ARGV, 4, tonumber(ARGV[3]))
  local at
  local function head(key)
    local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if #h == 2 then
      local s = tonumber(h[2])
      if at == nil or s < at then at = s end
    end
  end
  for qi = i, #ARGV do
    local qu = ARGV[qi]
    for _, w in ipairs(wfs) do
      local wf, vers = w.name, w.vers
      if not vers then
        vers = {'0'}
        for _, v in ipairs(redis.call('SMEMBERS', versionset(qu, wf))) do vers[#vers + 1] = v end
      end
      local prs = redis.call('ZRANGE', levelset(qu, wf), 0, -1)
      for _, v in ipairs(vers) do
        local ln = lane(qu, '0', v)
        head(readyq(wf, ln))
        head(leaseq(wf, ln))
        for _, p in ipairs(prs) do
          ln = lane(qu, p, v)
          head(readyq(wf, ln))
          head(leaseq(wf, ln))
        end
      end
    end
  end
  if at == nil then return {} end
  local d = at - NOW
  if d < 0 then d = 0 end
  return {f(d)}
end
