-- complete finishes a run under its lease, ending its execution
-- (Complete).
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: unused,
-- ARGV[5]: run id, ARGV[6]: final status, ARGV[7]: marked output, ARGV[8]:
-- error JSON, ARGV[9..11]: the notify's run id ("" for none), topic and
-- marked payload, ARGV[12]: marked progress to publish ("" leaves the
-- run's as it is).
-- Reply: {OK, notified} where notified is 1 delivered, 0 buffered, -1
-- target not found, -2 target finished (nothing sent) | {LEASELOST}.
local function main()
  local bad, st, ru = fence(ARGV[5])
  if bad then return bad end
  local r, id = KEYS[1], ARGV[5]
  local nid = ARGV[9]
  local nres = 0
  if nid ~= '' then
    local why = send_check(nid)
    if why == 'NOTFOUND' then nres = -1 elseif why == 'INVALID' or nid == id then nres = -2 end
  end
  if ARGV[12] ~= '' then
    finish(r, ru, st, ARGV[6], 'out', ARGV[7], 'err', ARGV[8], 'pg', ARGV[12])
  else
    finish(r, ru, st, ARGV[6], 'out', ARGV[7], 'err', ARGV[8])
  end
  if nid ~= '' and nres == 0 then nres = send(nid, ARGV[10], ARGV[11]) end
  return {'OK', nres}
end
