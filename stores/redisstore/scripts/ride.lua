-- ride writes a step's checkpoint under the lease and, when it was
-- written and no pause took effect with it, completes the run in the
-- same call, as complete.lua would right after (Checkpoint with a
-- Complete): a run whose workflow returns after its last step ends with
-- that step's write. An existing checkpoint or a pause leaves the run as
-- checkpoint.lua does, and nothing of the completion is written.
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts
-- (the current execution's).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3..11]: as checkpoint.lua's,
-- ARGV[12]: "" (a busy worker cannot complete the run); ARGV[13..21]:
-- the completion, as complete.lua's ARGV[6..14]; ARGV[22...]: encoded
-- attempts.
-- Reply: checkpoint.lua's, with {DONE, cr} in place of {OK, cr}: the
-- run completed.
local function main()
  local res, st, ru = write_step(22, true)
  if res[1] ~= 'OK' then return res end
  complete_run(KEYS[1], ru, st, ARGV, 13)
  return {'DONE', res[2]}
end
