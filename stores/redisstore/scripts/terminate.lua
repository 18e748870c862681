-- terminate ends an unfinished run and its execution (Terminate) and,
-- when given a child error, every unfinished descendant that terminates
-- with its parent, requesting the cancellation of those cancelled with
-- it (terminate_run in lib/state.lua).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id, ARGV[4]: error JSON,
-- ARGV[5..7]: the notify's run id ("" for none), topic and marked payload,
-- ARGV[8]: the descendants' error JSON ("" to leave them alone),
-- ARGV[9]: the marked reason of the cancellations it requests.
-- Reply: {OK, notified as in complete.lua, the IDs terminated, the run's
-- first} | {NOTFOUND} | {INVALID}.
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r, 'st', 'wf', 'qu', 'ln', 'pt', 'pr', 'qf'))
  if not st then return {'NOTFOUND'} end
  if finished(st) then return {'INVALID'} end
  local ids = {}
  terminate_run(r, run_of(id, wf, qu, ln, pt, pr, qf), st, ARGV[4], ARGV[8], ARGV[9], ids)
  return {'OK', send_notify(ARGV[5], ARGV[6], ARGV[7]), ids}
end
