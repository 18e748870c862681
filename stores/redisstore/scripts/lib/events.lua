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

-- send_check reports why an event cannot be sent to run id, or nil.
local function send_check(id)
  local st = redis.call('HGET', rkey(id), 'st')
  if not st then return 'NOTFOUND' end
  if finished(st) then return 'INVALID' end
  return nil
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
  redis.call('SET', opkey(op), cmsgpack.pack(res), 'PX', 60000)
  return res
end
