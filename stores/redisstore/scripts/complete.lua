-- complete finishes a run under its lease, ending its execution
-- (Complete) and, when given a child error, terminating every unfinished
-- descendant that terminates with its parent and requesting the
-- cancellation of those cancelled with it, as terminate.lua does (see
-- complete_run in lib/holder.lua).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: unused,
-- ARGV[5]: run id, ARGV[6]: final status, ARGV[7]: marked output, ARGV[8]:
-- error JSON, ARGV[9..11]: the notify's run id ("" for none), topic and
-- marked payload, ARGV[12]: marked progress to publish ("" leaves the
-- run's as it is), ARGV[13]: the descendants' error JSON ("" to leave
-- them alone), ARGV[14]: the marked reason of the cancellations it
-- requests.
-- Reply: {OK, notified} where notified is 1 delivered, 0 buffered, -1
-- target not found, -2 target finished (nothing sent) | {LEASELOST}.
local function main()
  local bad, st, ru = fence(ARGV[5])
  if bad then return bad end
  return {'OK', complete_run(KEYS[1], ru, st, ARGV, 6)}
end
