-- heartbeat extends the lease of a running run, fenced, and records the
-- step running and the progress published (Heartbeat).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: lease length
-- (µs), ARGV[5]: run id, ARGV[6]: the encoded active step ("" for none),
-- ARGV[7]: marked progress to publish ("" leaves the run's as it is).
-- Reply: {OK, "1" when a pause is requested, else "", "1" when a
-- cancellation is requested, else ""} | {LEASELOST,
-- status, token, lease until, now}: what the caller judges the loss by
-- (storage.LeaseLost), "" for what the run lacks.
local function main()
  local r = KEYS[1]
  local st, tok, wf, lu, preq, ln, cq = unpack(redis.call('HMGET', r, 'st', 'tok', 'wf', 'lu', 'preq', 'ln', 'cq'))
  if st ~= 'running' or tok ~= ARGV[3] then
    return {'LEASELOST', st or '', tok or '', lu or '', NOWS}
  end
  if ARGV[6] ~= '' then redis.call('HSET', r, 'act', ARGV[6]) end
  if ARGV[7] ~= '' then redis.call('HSET', r, 'pg', ARGV[7]) end
  extend(r, {id = ARGV[5], wf = wf, ln = ln or ''}, tonumber(ARGV[4]))
  return {'OK', preq and '1' or '', cq and '1' or ''}
end
