-- createpolicy creates runs as create.lua does, judging each one's start
-- policies, event and start key in the same atomic change (start_run in
-- lib/start.lua): CreateRuns with a run that has any of them. A batch
-- with none runs create.lua or createleased.lua, which carry none of
-- this code.
-- KEYS: the run hashes, one per run.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: operation ID (a repeated
-- call returns the first reply's results, with the runs as they are
-- now); ARGV[4...]: per run the 25 fields start_run reads.
-- Reply: per run {created (1 or 0), HGETALL of the run hash the result
-- describes, the replaced run's status ("" for none), joined (1 or 0),
-- the refusal ("" for none), delivered (1 or 0)}.
local function main()
  local res = once_get(ARGV[3])
  if not res then
    res = {}
    for i = 1, #KEYS do res[i] = start_run(KEYS[i], ARGV, 3 + (i - 1) * 25) end
    once_put(ARGV[3], res)
  end
  local out = {}
  for i, x in ipairs(res) do
    out[i] = {x[1], redis.call('HGETALL', rkey(x[2])), x[3], x[4], x[5], x[6]}
  end
  return out
end
