-- Shared helpers: plain functions of their arguments.
-- KEYS and ARGV: none read.

-- f formats a number as an integer: Lua's own number-to-string conversion
-- keeps 14 digits only, too few for microseconds since the epoch.
local function f(n) return string.format('%.0f', n) end

-- finished reports whether a run status is final.
local function finished(st)
  return st == 'complete' or st == 'errored' or st == 'terminated'
end

-- delivery_kind is the kind of the checkpoint an event delivered to a wait
-- case of stored kind n writes: n, or event when it has none
-- (storage.WaitCase.DeliveryKind).
local function delivery_kind(n)
  if not n or n == '' then return 'event' end
  return n
end

-- wait_also splits a wait's further cases (the run hash's wa field) as
-- codec.go's encodeAlso writes them, key \0 topic \0 kind \0 per case,
-- into a list of {key, topic, kind} (kind as given, maybe empty).
local function wait_also(wa)
  local out = {}
  for k, t, n in string.gmatch(wa, '([^%z]*)%z([^%z]*)%z([^%z]*)%z') do
    out[#out + 1] = {k, t, n}
  end
  return out
end

-- ev_split splits a buffered event as send writes it, seq:payload (seq
-- from the run hash's es counter, so the oldest of several topics' heads
-- is the lowest), into its sequence number and marked payload. An event
-- buffered before events carried one is the oldest: 0.
local function ev_split(e)
  local n, p = string.match(e, '^(%d+):(.*)$')
  if not n then return 0, e end
  return tonumber(n), p
end

-- lane is the part of a ready or lease set's key that names the queue,
-- priority and workflow version: "" for the default queue at priority 0
-- and version 0 (the keys of layout 1), queue:priority: for version 0
-- otherwise, and queue:priority:version: for another version (no name
-- holds a colon).
local function lane(qu, pr, vr)
  if not vr or vr == 0 or vr == '0' then
    if (not qu or qu == 'default') and (not pr or pr == 0 or pr == '0') then return '' end
    return (qu or 'default') .. ':' .. (pr or '0') .. ':'
  end
  return (qu or 'default') .. ':' .. (pr or '0') .. ':' .. vr .. ':'
end

-- read_workflows reads n workflows from args (ARGV) at i, as claims and wake
-- times pass them: each its name, the number k of its versions (-1 for
-- any) and those k versions. It returns them as {name, vers} (vers nil for
-- any) and the index of the argument after them.
local function read_workflows(args, i, n)
  local wfs = {}
  for _ = 1, n do
    local w = {name = args[i]}
    local k = tonumber(args[i + 1])
    if k >= 0 then
      w.vers = {}
      for j = i + 2, i + 1 + k do w.vers[#w.vers + 1] = args[j] end
      i = i + 2 + k
    else
      i = i + 2
    end
    wfs[#wfs + 1] = w
  end
  return wfs, i
end
