-- claim leases ready runs and runs whose lease expired (Claim).
-- KEYS: the ready set and the lease set of each workflow, in ARGV's order.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: owner, ARGV[4]: limit,
-- ARGV[5]: lease length (µs), ARGV[6...]: the workflows.
-- Reply: per claimed run {id, token, HMGET of its claim fields: wf, pa, in,
-- rec, ss, wk, wt, wn, wd, wa, dl, lu}.
local function main()
  local owner, limit, lf = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  local wfs = {}
  for i = 6, #ARGV do wfs[#wfs + 1] = ARGV[i] end
  local cands = {}
  for _, wf in ipairs(wfs) do
    local q = redis.call('ZRANGEBYSCORE', readyq(wf), '-inf', NOWS, 'WITHSCORES', 'LIMIT', 0, limit)
    for j = 1, #q, 2 do cands[#cands + 1] = {q[j], tonumber(q[j + 1]), wf, false} end
    local l = redis.call('ZRANGEBYSCORE', leaseq(wf), '-inf', NOWS, 'WITHSCORES', 'LIMIT', 0, limit)
    for j = 1, #l, 2 do cands[#cands + 1] = {l[j], tonumber(l[j + 1]), wf, true} end
  end
  table.sort(cands, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[1] < b[1]
  end)
  local lu = f(NOW + lf)
  local out = {}
  for i = 1, #cands do
    if #out >= limit then break end
    local id, wf, expired = cands[i][1], cands[i][3], cands[i][4]
    local r = rkey(id)
    local st, rec = unpack(redis.call('HMGET', r, 'st', 'rec'))
    local ok
    if expired then ok = (st == 'running') else ok = (st == 'queued' or st == 'waiting') end
    if ok then
      rec = tonumber(rec or '0')
      if expired then rec = rec + 1 end
      local tok = redis.call('HINCRBY', r, 'tok', 1)
      redis.call('HSET', r, 'st', 'running', 'own', owner, 'lu', lu, 'rec', f(rec), 'ua', NOWS)
      redis.call('HDEL', r, 'ready', 'act')
      if not expired then redis.call('ZREM', readyq(wf), id) end
      redis.call('ZADD', leaseq(wf), lu, id)
      index_status(id, wf, st, 'running')
      out[#out + 1] = {id, tok, redis.call('HMGET', r, 'wf', 'pa', 'in', 'rec', 'ss', 'wk', 'wt', 'wn', 'wd', 'wa', 'dl', 'lu')}
    else
      -- not claimable after all: an index entry out of step with the run
      redis.call('ZREM', readyq(wf), id)
      if st ~= 'running' then redis.call('ZREM', leaseq(wf), id) end
    end
  end
  return out
end
