-- send delivers an event to one run, or buffers it (SendEvent).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id, ARGV[4]: topic,
-- ARGV[5]: marked payload, ARGV[6]: operation ID (a repeated call returns
-- the first reply).
-- Reply: {OK, 1 delivered | 0 buffered} | {NOTFOUND} | {INVALID}.
local function main()
  local prev = once_get(ARGV[6])
  if prev then return prev end
  local why = send_check(ARGV[3])
  if why then return {why} end
  return once_put(ARGV[6], {'OK', send(ARGV[3], ARGV[4], ARGV[5])})
end
