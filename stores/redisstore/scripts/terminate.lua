-- terminate ends an unfinished run (Terminate).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id, ARGV[4]: error JSON,
-- ARGV[5..7]: the notify's run id ("" for none), topic and marked payload.
-- Reply: {OK, notified} as in complete.lua | {NOTFOUND} | {INVALID}.
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf = unpack(redis.call('HMGET', r, 'st', 'wf'))
  if not st then return {'NOTFOUND'} end
  if finished(st) then return {'INVALID'} end
  local nid = ARGV[5]
  local nres = 0
  if nid ~= '' then
    local why = send_check(nid)
    if why == 'NOTFOUND' then nres = -1 elseif why == 'INVALID' or nid == id then nres = -2 end
  end
  redis.call('HSET', r, 'err', ARGV[4])
  redis.call('HDEL', r, 'out')
  finish(r, id, wf, st, 'terminated')
  if nid ~= '' and nres == 0 then nres = send(nid, ARGV[6], ARGV[7]) end
  return {'OK', nres}
end
