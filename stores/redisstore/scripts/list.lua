#!lua flags=no-writes
-- list reads one page of a listing index (ListRuns). The filters the
-- index does not serve (see keyspace.listing: a parent's children index
-- serves the parent filter alone) are applied here, reading the index in
-- batches until the page is full.
-- KEYS[1]: the index.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: the lexicographic
-- start, ARGV[4]: how many runs at most, ARGV[5]: the workflow to keep
-- ("" for any), ARGV[6]: the status to keep ("" for any), ARGV[7]: the
-- queue to keep ("" for any), ARGV[8]: the workflow versions to keep,
-- each between commas (",0,3,"; "" for any).
-- Reply: HGETALL of each run's hash, in index order.
local function main()
  local start, limit, wf, st, qu, vs = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7], ARGV[8]
  local out = {}
  if wf == '' and st == '' and qu == '' and vs == '' then
    local ids = redis.call('ZRANGEBYLEX', KEYS[1], start, '+', 'LIMIT', 0, limit)
    for i, id in ipairs(ids) do
      out[i] = redis.call('HGETALL', rkey(id))
    end
    return out
  end
  local batch = math.max(limit, 100)
  while #out < limit do
    local ids = redis.call('ZRANGEBYLEX', KEYS[1], start, '+', 'LIMIT', 0, batch)
    for _, id in ipairs(ids) do
      local r = rkey(id)
      local rwf, rst, rqu, rvr = unpack(redis.call('HMGET', r, 'wf', 'st', 'qu', 'vr'))
      if (wf == '' or rwf == wf) and (st == '' or rst == st) and (qu == '' or (rqu or 'default') == qu) and
        (vs == '' or string.find(vs, ',' .. (rvr or '0') .. ',', 1, true)) then
        out[#out + 1] = redis.call('HGETALL', r)
        if #out >= limit then break end
      end
    end
    if #ids < batch then break end
    start = '(' .. ids[#ids]
  end
  return out
end
