-- Shared helpers: a run's search attributes (storage.Attr). The run
-- hash's at field holds them as name \0 type \0 value \0 per attribute,
-- the type s (string), n (number), t (time) or b (bool) and the value as
-- text: a string as it is, a number in Go's shortest form, a time in µs,
-- a bool 1 or 0 (encodeAttrs in attrs.go). That text is canonical, so two
-- values are equal exactly when their texts are. Each attribute is in
-- the equality index of its name, type and value (ae:, scored by the
-- run's creation in µs), and a number, time or string also in its name's
-- range index (an:, at:, scored by the value) or prefix index (as:, all
-- scores 0, members value \0 run ID).
-- KEYS and ARGV: none read; the callers pass the encodings.

-- attrs_parse splits an at field (nil or '' for none) into a list of
-- {name, type, value}.
local function attrs_parse(s)
  local out = {}
  if not s or s == '' then return out end
  for n, t, v in string.gmatch(s, '([^%z]*)%z([^%z]*)%z([^%z]*)%z') do
    out[#out + 1] = {n, t, v}
  end
  return out
end

-- attrs_encode joins a list of {name, type, value} into an at field.
local function attrs_encode(list)
  local b = {}
  for i, a in ipairs(list) do b[i] = a[1] .. '\0' .. a[2] .. '\0' .. a[3] .. '\0' end
  return table.concat(b)
end

-- attr_index puts attribute a ({name, type, value}) of run id, created
-- at ca (µs, a string), in its indexes.
local function attr_index(id, ca, a)
  local n, t, v = a[1], a[2], a[3]
  redis.call('ZADD', attr_eq(n, t, v), ca, id)
  if t == 'n' then
    redis.call('ZADD', attr_num(n), v, id)
  elseif t == 't' then
    redis.call('ZADD', attr_time(n), v, id)
  elseif t == 's' then
    redis.call('ZADD', attr_str(n), 0, v .. '\0' .. id)
  end
end

-- attr_unindex takes attribute a of run id out of its indexes.
local function attr_unindex(id, a)
  local n, t, v = a[1], a[2], a[3]
  redis.call('ZREM', attr_eq(n, t, v), id)
  if t == 'n' then
    redis.call('ZREM', attr_num(n), id)
  elseif t == 't' then
    redis.call('ZREM', attr_time(n), id)
  elseif t == 's' then
    redis.call('ZREM', attr_str(n), v .. '\0' .. id)
  end
end

-- attrs_add indexes the attributes of at field s of run id, created at
-- ca (µs, a string); the caller writes the field.
local function attrs_add(id, ca, s)
  for _, a in ipairs(attrs_parse(s)) do attr_index(id, ca, a) end
end

-- attrs_drop takes the attributes of at field s of run id out of their
-- indexes; the caller deletes the field (or the run).
local function attrs_drop(id, s)
  for _, a in ipairs(attrs_parse(s)) do attr_unindex(id, a) end
end

-- attrs_merge merges the attributes of at field set into those of at
-- field old (storage.MergeAttrs: a name set replaces its value and type,
-- a new name is added). It returns the merged list and the changes, each
-- {the attribute replaced (nil for a new name), the new one}; or, when
-- the merge would hold more than max attributes, nil and that number.
-- It only reads (nothing at all), so a caller judges before any write.
local function attrs_merge(old, set, max)
  local have, pos, changes = attrs_parse(old), {}, {}
  for i, a in ipairs(have) do pos[a[1]] = i end
  for _, a in ipairs(attrs_parse(set)) do
    local i = pos[a[1]]
    if not i then
      have[#have + 1] = a
      pos[a[1]] = #have
      changes[#changes + 1] = {false, a}
    elseif have[i][2] ~= a[2] or have[i][3] ~= a[3] then
      changes[#changes + 1] = {have[i], a}
      have[i] = a
    end
  end
  if #have > max then return nil, #have end
  return have, changes
end

-- attrs_apply writes a merge (attrs_merge) to run id's hash r: the at
-- field, and each change in the indexes. No change writes nothing.
local function attrs_apply(r, id, have, changes)
  if #changes == 0 then return end
  local ca = redis.call('HGET', r, 'ca')
  for _, c in ipairs(changes) do
    if c[1] then attr_unindex(id, c[1]) end
    attr_index(id, ca, c[2])
  end
  redis.call('HSET', r, 'at', attrs_encode(have))
end
