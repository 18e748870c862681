#!lua flags=no-writes
-- nextwake reads how long until a claim of the workflows could find a run
-- by time alone (NextWake): the lowest score of their ready and lease sets.
-- An entry out of step with its run (Claim drops those) may make the
-- answer early, never late.
-- KEYS: the ready set and the lease set of each workflow.
-- ARGV[1]: prefix, ARGV[2]: clock.
-- Reply: {} when every set is empty, else {microseconds from now, at least 0}.
local function main()
  local at
  for i = 1, #KEYS do
    local head = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    if #head == 2 then
      local s = tonumber(head[2])
      if at == nil or s < at then at = s end
    end
  end
  if at == nil then return {} end
  local d = at - NOW
  if d < 0 then d = 0 end
  return {f(d)}
end
