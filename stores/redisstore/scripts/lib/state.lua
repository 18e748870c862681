-- Shared helpers: a run's status, lease, wait and checkpoints.
-- KEYS: only fence reads KEYS[1], the run hash of a fenced script.
-- ARGV: only fence reads ARGV[3], the lease token of a fenced script.

-- index_status moves run id between the listing indexes of its status; the
-- caller writes the status field itself.
local function index_status(id, wf, old, new)
  if old == new then return end
  if old then
    redis.call('ZREM', idx_st(old), id)
    redis.call('ZREM', idx_wf_st(old, wf), id)
  end
  redis.call('ZADD', idx_st(new), 0, id)
  redis.call('ZADD', idx_wf_st(new, wf), 0, id)
end

local function set_status(r, id, wf, old, new)
  index_status(id, wf, old, new)
  redis.call('HSET', r, 'st', new, 'ua', NOWS)
end

-- clear_wait drops the run's registered event wait, if any, with all its
-- cases: the run leaves the wait set of every case's topic.
local function clear_wait(r, id)
  local t, wa = unpack(redis.call('HMGET', r, 'wt', 'wa'))
  if t then
    redis.call('SREM', waitset(t), id)
    if wa then
      for _, c in ipairs(wait_also(wa)) do redis.call('SREM', waitset(c[2]), id) end
    end
    redis.call('HDEL', r, 'wk', 'wt', 'wn', 'wd', 'wa')
  end
end

-- wait_case returns the key and delivery kind of the first case of the
-- registered wait of run hash r whose topic is topic (the wait's own case
-- wk, wt, wn first, then its further cases wa), or nil.
local function wait_case(r, topic)
  local wk, wt, wn, wa = unpack(redis.call('HMGET', r, 'wk', 'wt', 'wn', 'wa'))
  if not wt then return nil end
  if wt == topic then return wk, delivery_kind(wn) end
  if wa then
    for _, c in ipairs(wait_also(wa)) do
      if c[2] == topic then return c[1], delivery_kind(c[3]) end
    end
  end
  return nil
end

-- wait_has_key reports whether key is the key of a case of the registered
-- wait of run hash r, whose own key is wk (not nil): the further cases are
-- read only when wk is not the key.
local function wait_has_key(r, wk, key)
  if wk == key then return true end
  local wa = redis.call('HGET', r, 'wa')
  if not wa then return false end
  for _, c in ipairs(wait_also(wa)) do
    if c[1] == key then return true end
  end
  return false
end

-- put_cp writes a checkpoint of execution ex the caller knows is absent
-- and returns its encoding: seq \n created \n kind \n error-json \n
-- execution \n forked-from \n marked-output (forked-from 0: written in
-- its own execution). The caller resets the run's recovery count.
local function put_cp(r, c, key, kind, err, out, ex)
  local seq = redis.call('HINCRBY', r, 'seq', 1)
  local b = f(seq) .. '\n' .. NOWS .. '\n' .. kind .. '\n' .. err .. '\n' .. ex .. '\n0\n' .. out
  redis.call('HSET', c, key, b)
  return b
end

-- write_cp writes the checkpoint of key in execution ex unless one exists;
-- it returns the stored encoding.
local function write_cp(r, c, key, kind, err, out, ex)
  local old = redis.call('HGET', c, key)
  if old then return old end
  local b = put_cp(r, c, key, kind, err, out, ex)
  redis.call('HSET', r, 'rec', '0')
  return b
end

-- cp_split splits a checkpoint's encoding (see put_cp) into its seq,
-- created, kind, error JSON, execution, forked-from and marked output.
local function cp_split(b)
  return string.match(b, '^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$')
end

-- extend renews the lease of a running run to now+lf.
local function extend(r, id, wf, lf)
  local lu = f(NOW + lf)
  redis.call('HSET', r, 'lu', lu, 'ua', NOWS)
  redis.call('ZADD', leaseq(wf), lu, id)
end

-- release ends the run's lease: it leaves the lease set, and LeaseUntil
-- (kept with Owner and Token to describe the last lease) becomes now if it
-- was later.
local function release(r, id, wf)
  redis.call('ZREM', leaseq(wf), id)
  local lu = redis.call('HGET', r, 'lu')
  if lu and tonumber(lu) > NOW then redis.call('HSET', r, 'lu', NOWS) end
end

-- fence checks a fenced script's lease: KEYS[1] is the run hash, ARGV[3]
-- the token. It returns an error reply, or nil and the run's fields (ex,
-- the current execution, as a string). An unknown run has no lease to
-- hold: LEASELOST, as for any holder whose run went away.
local function fence()
  local st, tok, wf, wk, preq, ex = unpack(redis.call('HMGET', KEYS[1], 'st', 'tok', 'wf', 'wk', 'preq', 'ex'))
  if not st or st ~= 'running' or tok ~= ARGV[3] then return {'LEASELOST'} end
  return nil, st, wf, wk, preq, ex or '1'
end

-- finish clears what a finished run no longer has: lease, wait, schedule,
-- suspend state, pause request and active step; and ends its execution
-- now.
local function finish(r, id, wf, st, new)
  clear_wait(r, id)
  redis.call('HDEL', r, 'ss', 'ready', 'preq', 'act')
  release(r, id, wf)
  redis.call('ZREM', readyq(wf), id)
  set_status(r, id, wf, st, new)
  redis.call('HSET', r, 'ea', NOWS)
  -- tells waiters in every process that the run ended (Finished)
  redis.call('PUBLISH', ended_channel(), id)
end
