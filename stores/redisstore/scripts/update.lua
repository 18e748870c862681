-- update records an update for a run and delivers it (SendUpdate): an
-- update of the ID the run has already is returned as it is, nothing
-- written; otherwise the run must exist and be unfinished, and the
-- update is recorded pending with the run's next Seq (its place in the
-- run's update order) and sent as SendEvent sends an event on its topic
-- (send in lib/events.lua): written as the checkpoint of the waiting
-- case, or buffered in order with the run's other events.
-- KEYS[1]: the run hash, KEYS[2]: its updates, KEYS[3]: its replies,
-- KEYS[4]: its update order.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id, ARGV[4]: update ID,
-- ARGV[5]: update name, ARGV[6]: the name's topic, ARGV[7]: marked
-- payload, ARGV[8]: headers JSON ("" for none), ARGV[9]: operation ID (a
-- repeated call reports the update created and delivered as the first
-- did; only those flags are kept, not the payload).
-- Reply: {OK, created 1 | 0, delivered 1 | 0, encoded request, encoded
-- reply ("" while pending)} | {NOTFOUND} | {INVALID}.
local function main()
  local id, uid = ARGV[3], ARGV[4]
  local old = redis.call('HGET', KEYS[2], uid)
  if old then
    local prev = once_get(ARGV[9]) or {'OK', 0, 0}
    return {'OK', prev[2], prev[3], old, redis.call('HGET', KEYS[3], uid) or ''}
  end
  local why = send_check(id)
  if why then return {why} end
  local seq = redis.call('RPUSH', KEYS[4], uid)
  -- seq \n created \n name \n headers JSON \n marked payload
  local b = f(seq) .. '\n' .. NOWS .. '\n' .. ARGV[5] .. '\n' .. ARGV[8] .. '\n' .. ARGV[7]
  redis.call('HSET', KEYS[2], uid, b)
  local d = send(id, ARGV[6], ARGV[7])
  once_put(ARGV[9], {'OK', 1, d})
  return {'OK', 1, d, b, ''}
end
