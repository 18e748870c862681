#!lua flags=no-writes
-- list reads one page of a listing index (ListRuns), between two
-- lexicographic bounds, ascending or descending. The filters the index
-- does not serve (see keyspace.listing: a parent's children index serves
-- the parent filter alone; no index serves versions or the creation
-- range) are applied here, reading the index in batches until the page
-- is full or the range ends.
-- KEYS[1]: the index.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: the lexicographic
-- lower bound ("-", "[id" or "(id"), ARGV[4]: the upper bound ("+",
-- "[id" or "(id"), ARGV[5]: "1" to read descending, from the upper
-- bound, "" ascending, from the lower; ARGV[6]: how many runs at most,
-- ARGV[7]: the workflow to keep ("" for any), ARGV[8]: the status to keep
-- ("" for any), ARGV[9]: the queue to keep ("" for any), ARGV[10]: the
-- workflow versions to keep, each between commas (",0,3,"; "" for any),
-- ARGV[11] and ARGV[12]: the creation range to keep, created (µs) at or
-- after ARGV[11] and before ARGV[12] ("" for no bound).
-- Reply: HGETALL of each run's hash, in the order read.
local function main()
  local lo, hi, desc, limit = ARGV[3], ARGV[4], ARGV[5] == '1', tonumber(ARGV[6])
  local wf, st, qu, vs = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
  local from, to = tonumber(ARGV[11]), tonumber(ARGV[12])
  local function read(n)
    if desc then return redis.call('ZREVRANGEBYLEX', KEYS[1], hi, lo, 'LIMIT', 0, n) end
    return redis.call('ZRANGEBYLEX', KEYS[1], lo, hi, 'LIMIT', 0, n)
  end
  local out = {}
  if wf == '' and st == '' and qu == '' and vs == '' and not from and not to then
    for i, id in ipairs(read(limit)) do
      out[i] = redis.call('HGETALL', rkey(id))
    end
    return out
  end
  local batch = math.max(limit, 100)
  while #out < limit do
    local ids = read(batch)
    for _, id in ipairs(ids) do
      local r = rkey(id)
      local rwf, rst, rqu, rvr, rca = unpack(redis.call('HMGET', r, 'wf', 'st', 'qu', 'vr', 'ca'))
      local ca = tonumber(rca)
      if (wf == '' or rwf == wf) and (st == '' or rst == st) and (qu == '' or (rqu or 'default') == qu) and
        (vs == '' or string.find(vs, ',' .. (rvr or '0') .. ',', 1, true)) and
        (not from or (ca and ca >= from)) and (not to or (ca and ca < to)) then
        out[#out + 1] = redis.call('HGETALL', r)
        if #out >= limit then break end
      end
    end
    if #ids < batch then break end
    if desc then hi = '(' .. ids[#ids] else lo = '(' .. ids[#ids] end
  end
  return out
end
