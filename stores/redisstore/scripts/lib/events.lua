-- Shared helpers: delivering events, and answering a repeated call once.
-- KEYS and ARGV: none read.

-- deliver resolves the registered wait of run id with payload, delivered
-- to its case of key and delivery kind (see wait_case): the payload
-- becomes the checkpoint of key in the current execution, of that kind,
-- the whole wait is dropped (from every case's topic), and a waiting run
-- is queued (a paused one stays paused, ready now).
local function deliver(id, key, kind, payload)
  local r = rkey(id)
  local st, wf, ready, ex, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r,
    'st', 'wf', 'ready', 'ex', 'qu', 'ln', 'pt', 'pr', 'qf'))
  write_cp(r, ckey(id), key, kind, '', payload, ex or '1')
  clear_wait(r, id)
  if st == 'waiting' or st == 'queued' then
    local ru = run_of(id, wf, qu, ln, pt, pr, qf)
    if not ready or tonumber(ready) > NOW then
      ready = NOWS
      redis.call('HSET', r, 'ready', NOWS)
      ready_add(ru, NOWS)
    end
    set_status(r, ru, st, 'queued', ready)
    WOKE = true
  elseif st == 'paused' then
    redis.call('HSET', r, 'ready', NOWS)
  end
  redis.call('HSET', r, 'ua', NOWS)
end

-- send delivers an event to one existing, unfinished run: as a delivery
-- when a case of its wait is on the topic, else buffered in order, with
-- the next number of the run's es counter (see ev_split).
local function send(id, topic, payload)
  local r = rkey(id)
  local key, kind = wait_case(r, topic)
  if key then
    deliver(id, key, kind, payload)
    return 1
  end
  local n = redis.call('HINCRBY', r, 'es', 1)
  redis.call('RPUSH', evkey(id, topic), f(n) .. ':' .. payload)
  -- the run's topics with buffered events, so Purge finds their lists
  redis.call('SADD', evtopics(id), topic)
  return 0
end

-- rebuffer buffers again, for run id restarted (its wait cleared, the new
-- execution's copied checkpoints written), the updates that are pending
-- (no reply in ur:<id>) and whose payload is not the output of an update
-- checkpoint of the new execution (taken: the bare payloads, marker
-- dropped, so nil and empty alike), in Seq order, after dropping the run's
-- buffered events on topics starting with prefix (the update topics): an
-- update the ended execution took without replying would never reach the
-- new one otherwise. A run without a pending update reads no update.
local function rebuffer(id, prefix, taken)
  local r, et = rkey(id), evtopics(id)
  for _, topic in ipairs(redis.call('SMEMBERS', et)) do
    if string.sub(topic, 1, #prefix) == prefix then
      redis.call('DEL', evkey(id, topic))
      redis.call('SREM', et, topic)
    end
  end
  local ul, ur = ulkey(id), urkey(id)
  if redis.call('HLEN', ur) >= redis.call('LLEN', ul) then return end
  local up = upkey(id)
  for _, uid in ipairs(redis.call('LRANGE', ul, 0, -1)) do
    if redis.call('HEXISTS', ur, uid) == 0 then
      -- seq \n created \n name \n headers JSON \n marked payload
      local name, payload = string.match(redis.call('HGET', up, uid), '^[^\n]*\n[^\n]*\n([^\n]*)\n[^\n]*\n(.*)$')
      if not taken[string.sub(payload, 2)] then
        local topic = prefix .. name
        local n = redis.call('HINCRBY', r, 'es', 1)
        redis.call('RPUSH', evkey(id, topic), f(n) .. ':' .. payload)
        redis.call('SADD', et, topic)
      end
    end
  end
end

-- send_check reports why an event cannot be sent to run id, or nil.
local function send_check(id)
  local st = redis.call('HGET', rkey(id), 'st')
  if not st then return 'NOTFOUND' end
  if finished(st) then return 'INVALID' end
  return nil
end

-- send_notify sends the notify of a run that finished to run id ('' for
-- none), dropping it when that run is unknown or finished. It returns 1
-- delivered, 0 buffered (or nothing to send), -1 target not found, -2
-- target finished. Callers send it last, after every run they finish, so
-- that it never reaches one of those.
local function send_notify(id, topic, payload)
  if id == '' then return 0 end
  local why = send_check(id)
  if why == 'NOTFOUND' then return -1 end
  if why == 'INVALID' then return -2 end
  return send(id, topic, payload)
end

-- once_get and once_put make a script safe to repeat: go-redis sends a
-- command again when its reply was lost (a read timeout, a dropped
-- connection), and a repeated SendEvent must not buffer the event twice.
-- The caller's operation ID keys the first reply for a minute, longer than
-- the client's retries take.
local function once_get(op)
  local prev = redis.call('GET', opkey(op))
  if prev then return cmsgpack.unpack(prev) end
  return nil
end

local function once_put(op, res)
  -- A Cluster's delivery from its outbox (an operation ID starting ob:)
  -- may be repeated by a sweep long after the first: it is kept a day.
  local ttl = 60000
  if string.sub(op, 1, 3) == 'ob:' then ttl = 86400000 end
  redis.call('SET', opkey(op), cmsgpack.pack(res), 'PX', ttl)
  return res
end

-- wait_cases returns a wait's cases in order, each {key, topic, kind as
-- given}: its own (key k, topic t, kind n), then those of also as
-- encodeAlso writes them ("" for none).
local function wait_cases(k, t, n, also)
  local cases = {{k, t, n}}
  if also ~= '' then
    for _, cs in ipairs(wait_also(also)) do cases[#cases + 1] = cs end
  end
  return cases
end

-- take_case resolves a wait of run id (run hash r, checkpoints c,
-- execution ex) at once if it can: the checkpoint of the first of cases
-- (see wait_cases) that has one, or else the oldest event buffered on
-- any case's topic (the head of that topic's list with the lowest
-- sequence number), consumed and written as its case's checkpoint, of
-- its delivery kind. It returns the checkpoint's encoding and key, or
-- nil having changed nothing.
local function take_case(r, c, id, cases, ex)
  for _, cs in ipairs(cases) do
    local have = redis.call('HGET', c, cs[1])
    if have then return have, cs[1] end
  end
  local pick = 1
  if #cases > 1 then
    pick = nil
    local low
    for i, cs in ipairs(cases) do
      local head = redis.call('LINDEX', evkey(id, cs[2]), 0)
      if head then
        local seq = ev_split(head)
        if not low or seq < low then pick, low = i, seq end
      end
    end
  end
  if not pick then return nil end
  local cs = cases[pick]
  local ev = redis.call('LPOP', evkey(id, cs[2]))
  if not ev then return nil end
  local _, payload = ev_split(ev)
  return write_cp(r, c, cs[1], delivery_kind(cs[3]), '', payload, ex), cs[1]
end
