-- terminate ends an unfinished run and its execution (Terminate) and,
-- when given a child error, every unfinished descendant that terminates
-- with its parent: it walks the children indexes from the run, breadth
-- first and each run's children in ID order, descending through every
-- child of the default policy, finished or not, and never into one that
-- abandons its parent.
-- KEYS[1]: the run hash.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: run id, ARGV[4]: error JSON,
-- ARGV[5..7]: the notify's run id ("" for none), topic and marked payload,
-- ARGV[8]: the descendants' error JSON ("" to leave them alone).
-- Reply: {OK, notified as in complete.lua, the IDs terminated, the run's
-- first} | {NOTFOUND} | {INVALID}.
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r, 'st', 'wf', 'qu', 'ln', 'pt', 'pr', 'qf'))
  if not st then return {'NOTFOUND'} end
  if finished(st) then return {'INVALID'} end
  redis.call('HSET', r, 'err', ARGV[4])
  redis.call('HDEL', r, 'out')
  finish(r, run_of(id, wf, qu, ln, pt, pr, qf), st, 'terminated')
  local ids = {id}
  if ARGV[8] ~= '' then
    local queue, seen, i = {id}, {[id] = true}, 1
    while i <= #queue do
      local kids = redis.call('ZRANGE', chkey(queue[i]), 0, -1)
      i = i + 1
      for _, k in ipairs(kids) do
        if not seen[k] then
          seen[k] = true
          local kr = rkey(k)
          local kst, kwf, kpp, kqu, kln, kpt, kpr, kqf = unpack(redis.call('HMGET', kr, 'st', 'wf', 'pp', 'qu', 'ln', 'pt', 'pr', 'qf'))
          if kst and (not kpp or kpp == '') then
            if not finished(kst) then
              redis.call('HSET', kr, 'err', ARGV[8])
              redis.call('HDEL', kr, 'out')
              finish(kr, run_of(k, kwf, kqu, kln, kpt, kpr, kqf), kst, 'terminated')
              ids[#ids + 1] = k
            end
            queue[#queue + 1] = k
          end
        end
      end
    end
  end
  -- the notify goes last, so that it never reaches a run terminated here
  local nid, nres = ARGV[5], 0
  if nid ~= '' then
    local why = send_check(nid)
    if why == 'NOTFOUND' then nres = -1 elseif why == 'INVALID' then nres = -2 end
    if nres == 0 then nres = send(nid, ARGV[6], ARGV[7]) end
  end
  return {'OK', nres, ids}
end
