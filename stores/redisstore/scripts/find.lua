#!lua flags=no-writes
-- find reads one page of a listing (ListRuns) that list.lua does not
-- serve: in creation order (storage.OrderCreated), of top-level runs, or
-- filtered by search attributes. It applies every filter of the query to
-- each run it reads (check), and reads the runs one of three ways,
-- whichever its estimate of the runs read says is cheapest:
--
--   - walk KEYS[1] in the listing's order, from the cursor, in batches
--     until the page is full: the query's listing index in ID order
--     (lexicographic), the index by creation in creation order (scored
--     by creation, from the cursor's rank);
--   - in creation order, walk the equality index of an attribute filter
--     the same way (it is scored by creation too);
--   - read every run a driver names (an attribute filter's index range,
--     or in creation order the listing index of the other filters,
--     KEYS[2]), and sort those that pass by the listing's order.
--
-- The estimate takes the smallest driver's count, m (each count costs a
-- ZCARD, ZCOUNT or ZLEXCOUNT): a walk reads about limit * N / m runs of
-- N (but never more than its index holds), a sort reads the m runs. A
-- walk that reads four times its estimate (and a thousand runs at least)
-- before the page is full sorts the rest of the page from where it got
-- to. A driver with no run makes the page empty at once.
--
-- Strings are compared byte by byte, as Redis's lexicographic ranges and
-- Go compare them: with < when the server's collation is C's (Redis sets
-- LC_COLLATE from its environment, and Lua's < follows it), else byte by
-- byte in Lua.
-- KEYS[1]: the index walked; KEYS[2]: in creation order, the listing
-- index of the query's other filters (driver x), else unused.
-- ARGV[1]: prefix, ARGV[2]: clock (unused); ARGV[3]: "c" for creation
-- order, "" for ID order; ARGV[4]: "1" to read descending; ARGV[5]: how
-- many runs at most; ARGV[6], ARGV[7]: the lexicographic bounds of the
-- IDs listed ("-", "[id" or "(id"; "+" or "(id"), which in ID order hold
-- the cursor; ARGV[8], ARGV[9]: the cursor in creation order, its
-- creation (µs) and ID ("" for none); ARGV[10]: the workflow to keep ("" for
-- any), ARGV[11]: the status, ARGV[12]: the queue, ARGV[13]: the
-- versions (",0,3,"), ARGV[14], ARGV[15]: the creation range (µs, created
-- at or after ARGV[14] and before ARGV[15], "" for no bound), ARGV[16]:
-- "1" for top-level runs only, ARGV[17]: the parent ("" for any);
-- ARGV[18]: the number of drivers, each four entries: e, name, type,
-- value (an equality index); n or t, name, least and greatest score (a
-- number's or time's range index); p, name, lexicographic bounds (a
-- string's prefix index); x, "", lexicographic bounds (KEYS[2]); then
-- the number of attribute filters, each four entries: name, type (s, n,
-- t, b), comparison (=, <, <=, >, >=, ^=) and value, as text (see
-- lib/attrs.lua); then the plan to follow whatever the estimate ("walk",
-- "eq" or "sort", or "spill" or "spill-eq" for a walk whose budget is two
-- runs; "" to judge) and "1" to compare strings byte by byte in Lua
-- whatever the collation, which tests set.
-- Reply: HGETALL of each run's hash, in order.

-- bytewise is true when < compares strings byte by byte.
local bytewise = ('B' < 'a') and ('a-c' < 'ab') and ('a\127' < 'a\128')

-- lt reports whether string a sorts before b, byte by byte.
local function lt(a, b)
  if bytewise then return a < b end
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- icmp compares two integers written in decimal (a time in µs, which a
-- Lua number may not hold exactly): -1, 0 or 1.
local function icmp(a, b)
  if a == b then return 0 end
  local na, nb = string.byte(a, 1) == 45, string.byte(b, 1) == 45
  if na ~= nb then return na and -1 or 1 end
  local c
  if #a ~= #b then c = #a < #b and -1 or 1 else c = a < b and -1 or 1 end
  if na then c = -c end
  return c
end

local function main()
  local created, desc, limit = ARGV[3] == 'c', ARGV[4] == '1', tonumber(ARGV[5])
  local lo, hi = ARGV[6], ARGV[7]
  local cca, cid = tonumber(ARGV[8]), ARGV[9]
  local wf, st, qu, vs = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
  local from, to = tonumber(ARGV[14]), tonumber(ARGV[15])
  local top, parent = ARGV[16] == '1', ARGV[17]
  local drivers, filters, i = {}, {}, 19
  for _ = 1, tonumber(ARGV[18]) do
    drivers[#drivers + 1] = {ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]}
    i = i + 4
  end
  local nf = tonumber(ARGV[i])
  i = i + 1
  for _ = 1, nf do
    filters[#filters + 1] = {ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]}
    i = i + 4
  end
  local force = ARGV[i]
  if ARGV[i + 1] == '1' then bytewise = false end

  -- inbounds reports whether id lies within the lexicographic bounds
  local function inbounds(id)
    if lo ~= '-' then
      local b = string.sub(lo, 2)
      if string.byte(lo, 1) == 91 then
        if lt(id, b) then return false end
      elseif not lt(b, id) then
        return false
      end
    end
    if hi ~= '+' then
      local b = string.sub(hi, 2)
      if string.byte(hi, 1) == 40 then
        if not lt(id, b) then return false end
      elseif lt(b, id) then
        return false
      end
    end
    return true
  end

  -- past reports whether a run created at ca lies past the cursor in
  -- creation order
  local function past(ca, id)
    if not cca then return true end
    if ca ~= cca then
      if desc then return ca < cca end
      return ca > cca
    end
    if desc then return lt(id, cid) end
    return lt(cid, id)
  end

  -- byname holds the filters by attribute name, and needles the text
  -- each filter's attribute must hold in an at field: name, type and,
  -- for an equality, value, each ended by a NUL byte (lib/attrs.lua)
  local byname, needles = {}, {}
  for j, fl in ipairs(filters) do
    byname[fl[1]] = byname[fl[1]] or {}
    table.insert(byname[fl[1]], fl)
    needles[j] = fl[1] .. '\0' .. fl[2] .. '\0'
    if fl[3] == '=' then needles[j] = needles[j] .. fl[4] .. '\0' end
  end

  -- pass1 reports whether value v of type t passes filter fl
  local function pass1(fl, t, v)
    if t ~= fl[2] then return false end
    local op, w = fl[3], fl[4]
    if op == '=' then return v == w end
    if op == '^=' then return string.sub(v, 1, #w) == w end
    local c
    if t == 'n' then
      local x, y = tonumber(v), tonumber(w)
      c = (x < y and -1) or (x > y and 1) or 0
    else
      c = icmp(v, w)
    end
    if op == '<' then return c < 0 end
    if op == '<=' then return c <= 0 end
    if op == '>' then return c > 0 end
    return c >= 0
  end

  -- attrs_pass reports whether the attributes of at field s pass every
  -- filter (storage.AttrFilter.Match). A field that lacks a filter's
  -- needle fails at once, without being split (most runs a walk reads
  -- do); the others are split and compared.
  local function attrs_pass(s)
    if not s then return false end
    for _, nd in ipairs(needles) do
      if not string.find(s, nd, 1, true) then return false end
    end
    local seen = 0
    for n, t, v in string.gmatch(s, '([^%z]*)%z([^%z]*)%z([^%z]*)%z') do
      local fls = byname[n]
      if fls then
        for _, fl in ipairs(fls) do
          if not pass1(fl, t, v) then return false end
        end
        seen = seen + #fls
      end
    end
    return seen == #filters
  end

  -- fields are the run hash's fields check reads: its creation (which
  -- every run has) and those the filters need, at their places in it
  local fields, at = {'ca'}, {}
  for _, f in ipairs({{'wf', wf ~= ''}, {'st', st ~= ''}, {'qu', qu ~= ''}, {'vr', vs ~= ''},
    {'pa', top or parent ~= ''}, {'at', #filters > 0}}) do
    if f[2] then
      fields[#fields + 1] = f[1]
      at[f[1]] = #fields
    end
  end

  -- check returns the creation (µs) of run id when it passes every
  -- filter but the cursor and the ID bounds, else nil
  local function check(id)
    local v = redis.call('HMGET', rkey(id), unpack(fields))
    local ca = tonumber(v[1])
    if not ca then return nil end
    if (wf ~= '' and v[at.wf] ~= wf) or (st ~= '' and v[at.st] ~= st) or
      (qu ~= '' and (v[at.qu] or 'default') ~= qu) or
      (vs ~= '' and not string.find(vs, ',' .. (v[at.vr] or '0') .. ',', 1, true)) or
      (from and ca < from) or (to and ca >= to) or
      (top and v[at.pa] and v[at.pa] ~= '') or (parent ~= '' and v[at.pa] ~= parent) then
      return nil
    end
    if #filters > 0 and not attrs_pass(v[at.at]) then return nil end
    return ca
  end

  local out = {}
  local batch = math.max(limit, 100)

  -- walk_lex walks a lexicographic index between the bounds, reading at
  -- most budget runs (nil for no bound); a walk that spends its budget
  -- before the page is full moves the bounds past the last run it read
  -- and returns true
  local function walk_lex(key, budget)
    local l, h = lo, hi
    while #out < limit do
      local ids
      if desc then
        ids = redis.call('ZREVRANGEBYLEX', key, h, l, 'LIMIT', 0, batch)
      else
        ids = redis.call('ZRANGEBYLEX', key, l, h, 'LIMIT', 0, batch)
      end
      for _, id in ipairs(ids) do
        if budget then
          if budget <= 0 then return true end
          budget = budget - 1
        end
        if check(id) then
          out[#out + 1] = id
          if #out >= limit then return end
        end
        if desc then hi = '(' .. id else lo = '(' .. id end
      end
      if #ids < batch then return end
      if desc then h = '(' .. ids[#ids] else l = '(' .. ids[#ids] end
    end
  end

  -- first_rank is the rank (from the end when descending) of the first
  -- entry of index key, scored by creation, past the cursor and within
  -- the creation range
  local function first_rank(key)
    local s = 0
    if desc and to then
      s = redis.call('ZCOUNT', key, f(to), '+inf')
    elseif not desc and from then
      s = redis.call('ZCOUNT', key, '-inf', '(' .. f(from))
    end
    if cca then
      local r
      local sc = redis.call('ZSCORE', key, cid)
      if sc and tonumber(sc) == cca then
        if desc then r = redis.call('ZREVRANK', key, cid) + 1 else r = redis.call('ZRANK', key, cid) + 1 end
      else
        -- the cursor's run is not there: count the runs up to it
        local ties = redis.call('ZRANGEBYSCORE', key, f(cca), f(cca))
        if desc then
          r = redis.call('ZCOUNT', key, '(' .. f(cca), '+inf')
          for _, m in ipairs(ties) do
            if not lt(m, cid) then r = r + 1 end
          end
        else
          r = redis.call('ZCOUNT', key, '-inf', '(' .. f(cca))
          for _, m in ipairs(ties) do
            if not lt(cid, m) then r = r + 1 end
          end
        end
      end
      if r > s then s = r end
    end
    return s
  end

  -- walk_created walks an index scored by creation from the cursor; with
  -- sure, the index holds only runs that pass every filter but the ID
  -- bounds, so it reads no run to check them. It reads at most budget
  -- runs (nil for no bound) as walk_lex does, moving the cursor past the
  -- last run it read when it spends it before the page is full.
  local function walk_created(key, sure, budget)
    local s = first_rank(key)
    while #out < limit do
      local got
      if desc then
        got = redis.call('ZREVRANGE', key, s, s + batch - 1, 'WITHSCORES')
      else
        got = redis.call('ZRANGE', key, s, s + batch - 1, 'WITHSCORES')
      end
      for k = 1, #got, 2 do
        local id, sc = got[k], tonumber(got[k + 1])
        if (desc and from and sc < from) or (not desc and to and sc >= to) then return end
        if budget then
          if budget <= 0 then return true end
          budget = budget - 1
        end
        if (sure or check(id)) and inbounds(id) then
          out[#out + 1] = id
          if #out >= limit then return end
        end
        cca, cid = sc, id
      end
      if #got < 2 * batch then return end
      s = s + batch
    end
  end

  -- count is how many runs driver d names
  local function count(d)
    local k, a, b, c = d[1], d[2], d[3], d[4]
    if k == 'e' then return redis.call('ZCARD', attr_eq(a, b, c)) end
    if k == 'n' then return redis.call('ZCOUNT', attr_num(a), b, c) end
    if k == 't' then return redis.call('ZCOUNT', attr_time(a), b, c) end
    if k == 'p' then return redis.call('ZLEXCOUNT', attr_str(a), b, c) end
    return redis.call('ZLEXCOUNT', KEYS[2], b, c)
  end

  -- sorted reads every run driver d names and puts in out those that
  -- pass, in the listing's order
  local function sorted(d)
    local k, a, b, c = d[1], d[2], d[3], d[4]
    local ids
    if k == 'e' then
      ids = redis.call('ZRANGE', attr_eq(a, b, c), 0, -1)
    elseif k == 'n' then
      ids = redis.call('ZRANGEBYSCORE', attr_num(a), b, c)
    elseif k == 't' then
      ids = redis.call('ZRANGEBYSCORE', attr_time(a), b, c)
    elseif k == 'x' then
      ids = redis.call('ZRANGEBYLEX', KEYS[2], b, c)
    else
      ids = {}
      for j, m in ipairs(redis.call('ZRANGEBYLEX', attr_str(a), b, c)) do ids[j] = string.match(m, '%z(.*)$') end
    end
    -- the candidates in the listing's order, ascending: in creation
    -- order by creation (read alone first, a field per run) then ID, as
    -- strings that sort so when < compares bytes (the creation in 20
    -- digits, a NUL byte, the ID)
    local keep = {}
    if created then
      local pads = {}
      for _, id in ipairs(ids) do
        if inbounds(id) then
          local cs = redis.call('HGET', rkey(id), 'ca')
          local ca = tonumber(cs)
          if ca and (not from or ca >= from) and (not to or ca < to) and past(ca, id) then
            if bytewise then
              local n = 20 - #cs
              if not pads[n] then pads[n] = string.rep('0', n) end
              keep[#keep + 1] = pads[n] .. cs .. '\0' .. id
            else
              keep[#keep + 1] = {ca, id}
            end
          end
        end
      end
      if bytewise then
        table.sort(keep)
        for j, k in ipairs(keep) do keep[j] = string.match(k, '%z(.*)$') end
      else
        table.sort(keep, function(x, y)
          if x[1] ~= y[1] then return x[1] < y[1] end
          return lt(x[2], y[2])
        end)
        for j, k in ipairs(keep) do keep[j] = k[2] end
      end
    else
      for _, id in ipairs(ids) do
        if inbounds(id) then keep[#keep + 1] = id end
      end
      if bytewise then table.sort(keep) else table.sort(keep, lt) end
    end
    local first, last, step = 1, #keep, 1
    if desc then first, last, step = #keep, 1, -1 end
    for j = first, last, step do
      local id = keep[j]
      if check(id) then
        out[#out + 1] = id
        if #out >= limit then return end
      end
    end
  end

  -- the plan: the smallest driver (m runs), and in creation order the
  -- smallest equality index (om runs)
  local best, m, eq, om = nil, nil, nil, nil
  for _, d in ipairs(drivers) do
    local n = count(d)
    if n == 0 then return {} end
    if not m or n < m then best, m = d, n end
    if created and d[1] == 'e' and (not om or n < om) then eq, om = d, n end
  end
  -- the filters no index by creation serves (the walked one serves the
  -- workflow, an equality index its filter, both the creation range)
  local rest = st ~= '' or qu ~= '' or vs ~= '' or top or parent ~= ''
  local walk = walk_lex
  if created then
    walk = function(key, budget) return walk_created(key, not rest and #filters == 0, budget) end
  end
  if not best then
    walk(KEYS[1])
  else
    -- the estimates, in about the time of an HGET: a walk reads limit * n
    -- / m runs (at most its index's), each an HMGET and a look at its
    -- attributes; an equality index walked without checking costs its
    -- entries alone; a sort reads one field of each of the m runs (in ID
    -- order none) and sorts them
    local n = redis.call('ZCARD', idx_all())
    local sure = not rest and wf == '' and #filters == 1
    local reads = math.min(redis.call('ZCARD', KEYS[1]), limit * n / m)
    local plan, cost = 'walk', 2 * reads
    if eq then
      local r = math.min(om, limit * om / m)
      local c = 2 * r
      if sure then c = r / 2 end
      if c <= cost then plan, cost, reads = 'eq', c, r end
    end
    local sort = m
    if not created then sort = bytewise and m / 2 or m * 2 end
    if sort < cost then plan = 'sort' end
    -- a walk reads at most four times its estimate (at least a
    -- thousand runs), and then sorts the rest of the page from where it
    -- got to: a walk whose matches lie far from its start (the estimate
    -- takes them as spread evenly) costs at most that and the sort
    local budget = math.max(1000, 4 * reads)
    if force == 'sort' or force == 'walk' or force == 'eq' and eq then plan = force end
    if force == 'spill' or force == 'spill-eq' and eq then
      plan, budget = string.sub(force, 7), 2
      if plan == '' then plan = 'walk' end
    end
    local spilt = false
    if plan == 'eq' then
      spilt = walk_created(attr_eq(eq[2], eq[3], eq[4]), sure, budget)
    elseif plan == 'walk' then
      spilt = walk(KEYS[1], budget)
    end
    if plan == 'sort' or spilt then sorted(best) end
  end
  for j, id in ipairs(out) do out[j] = redis.call('HGETALL', rkey(id)) end
  return out
end
