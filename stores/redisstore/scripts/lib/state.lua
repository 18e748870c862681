-- Shared helpers: a run's status, lease, wait and checkpoints.
-- KEYS: only fence reads KEYS[1], the run hash of a fenced script.
-- ARGV: only fence reads ARGV[3], the lease token of a fenced script.

-- run_of describes a run for the helpers that keep its indexes: its ID,
-- workflow, and the run hash's qu (queue, absent for the default queue),
-- ln (lane, see lane), pt (partition), pr (priority, absent for 0) and qf
-- (set while the run is in its queue's set of queued runs; a run queued
-- by code of layout 2 when it was due is in none and has none) fields, as
-- the caller read them with the others it needs.
local function run_of(id, wf, qu, ln, pt, pr, qf)
  return {id = id, wf = wf, qu = qu or 'default', ln = ln or '', pt = pt, pr = pr, qf = qf}
end

-- run_info reads what run_of needs of run id's hash r.
local function run_info(r, id)
  local wf, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r, 'wf', 'qu', 'ln', 'pt', 'pr', 'qf'))
  return run_of(id, wf, qu, ln, pt, pr, qf)
end

-- index_status moves run ru between the listing indexes of its status
-- (all runs', its workflow's, and its queue's unless that is the default
-- queue, whose counts are the rest) and keeps the partitions' places: a
-- running run of a partition is in the partition's running set (a
-- queue's running index counts the queue's places). The caller writes
-- the status field itself.
local function index_status(ru, old, new)
  if old == new then return end
  local id, wf, qu = ru.id, ru.wf, ru.qu
  local own = qu ~= 'default'
  if old then
    redis.call('ZREM', idx_st(old), id)
    redis.call('ZREM', idx_wf_st(old, wf), id)
    if own then redis.call('ZREM', idx_q_st(old, qu), id) end
    if old == 'running' and ru.pt then redis.call('SREM', partset(qu, ru.pt), id) end
  end
  redis.call('ZADD', idx_st(new), 0, id)
  redis.call('ZADD', idx_wf_st(new, wf), 0, id)
  if own then redis.call('ZADD', idx_q_st(new, qu), 0, id) end
  if new == 'running' and ru.pt then redis.call('SADD', partset(qu, ru.pt), id) end
end

-- set_status changes run ru's status from old to new. A queued run goes
-- to its queue's set of queued runs by ReadyAt (ready, µs; qf:<queue>,
-- flagged qf in the run hash), by which QueueStats tells the scheduled
-- from the ready and finds the oldest ready run; any other change takes
-- it out. The caller's further fields (field, value pairs) go in the
-- same HSET as the status.
local function set_status(r, ru, old, new, ready, ...)
  index_status(ru, old, new)
  if new == 'queued' then
    redis.call('ZADD', queuedq(ru.qu), ready, ru.id)
    redis.call('HSET', r, 'st', new, 'ua', NOWS, 'qf', '1', ...)
    return
  end
  if ru.qf then
    redis.call('ZREM', queuedq(ru.qu), ru.id)
    redis.call('HDEL', r, 'qf')
  end
  redis.call('HSET', r, 'st', new, 'ua', NOWS, ...)
end

-- ready_add puts run ru in its lane's ready set, scored by ReadyAt
-- (ready, µs), and a priority other than 0 in the levels set of the
-- run's queue and workflow, which Claim and NextWake read. (A version
-- other than 0 went in the versions set when the run was created, and
-- stays there.)
local function ready_add(ru, ready)
  redis.call('ZADD', readyq(ru.wf, ru.ln), ready, ru.id)
  if ru.pr then redis.call('ZADD', levelset(ru.qu, ru.wf), ru.pr, ru.pr) end
end

-- record_start records the start of run id under lease token tok (a
-- string) in queue qu's set of starts, scored by now, which the claims
-- that name the queue's rate count and prune.
local function record_start(qu, id, tok)
  redis.call('ZADD', startsq(qu), NOWS, id .. ':' .. tok)
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
-- execution \n forked-from \n result (forked-from 0: written in its own
-- execution; the result out, the marked output or the marked input and
-- output, see cp_split). The caller resets the run's recovery count.
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
-- created, kind, error JSON, execution, forked-from and result: the
-- marked output, or when the checkpoint keeps its call's input, a \2
-- byte, the marked input's length, a colon, the marked input and the
-- marked output (encodeResult in codec.go; cp_out reads the output).
local function cp_split(b)
  return string.match(b, '^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$')
end

-- cp_out returns the marked output of a checkpoint's result (cp_split).
local function cp_out(res)
  if string.byte(res, 1) ~= 2 then return res end
  local n, rest = string.match(res, '^\2(%d+):(.*)$')
  return string.sub(rest, tonumber(n) + 1)
end

-- extend renews the lease of running run ru to now+lf.
local function extend(r, ru, lf)
  local lu = f(NOW + lf)
  redis.call('HSET', r, 'lu', lu, 'ua', NOWS)
  redis.call('ZADD', leaseq(ru.wf, ru.ln), lu, ru.id)
end

-- release ends the run's lease: it leaves the lease set, and LeaseUntil
-- (kept with Owner and Token to describe the last lease) becomes now if it
-- was later.
local function release(r, ru)
  redis.call('ZREM', leaseq(ru.wf, ru.ln), ru.id)
  local lu = redis.call('HGET', r, 'lu')
  if lu and tonumber(lu) > NOW then redis.call('HSET', r, 'lu', NOWS) end
end

-- fence checks a fenced script's lease: KEYS[1] is the run hash, ARGV[3]
-- the token, id the run's ID. It returns an error reply, or nil and the
-- run's status, the run (run_of), its wait key, pause request and ex (the
-- current execution, as a string). An unknown run has no lease to hold:
-- LEASELOST, as for any holder whose run went away.
--
-- Every step's checkpoint calls it, so it reads as few fields as it can:
-- the queue and priority come from the lane (queue:priority:, then the
-- version when not 0; absent for the default queue at priority 0 and
-- version 0), and a running run is never in its queue's set of queued
-- runs (the claim took it out), so qf is not read.
--
-- The caller may name up to three more fields of the run hash to read in
-- the same HMGET; their values follow ex.
local function fence(id, ...)
  local st, tok, wf, wk, preq, ex, ln, pt, x1, x2, x3 = unpack(redis.call('HMGET', KEYS[1],
    'st', 'tok', 'wf', 'wk', 'preq', 'ex', 'ln', 'pt', ...))
  if not st or st ~= 'running' or tok ~= ARGV[3] then return {'LEASELOST'} end
  local qu, pr
  if ln then
    qu, pr = string.match(ln, '^([^:]*):([^:]*):')
    if pr == '0' then pr = nil end
  end
  return nil, st, run_of(id, wf, qu, ln, pt, pr), wk, preq, ex or '1', x1, x2, x3
end

-- finish clears what a finished run no longer has: lease, wait, schedule,
-- suspend state, pause request, active step and queued place; ends
-- its execution now; writes the caller's further fields (field, value
-- pairs, with the status in one HSET); and files it by its end in the
-- finished indexes Purge reads. Every run ends here, so it reads the run
-- hash once and clears its fields in one HDEL. A running run is in no
-- ready set (the claim took it out; an entry out of step would be dropped
-- by the next claim that reads it).
local function finish(r, ru, st, new, ...)
  local id = ru.id
  local t, wa, lu = unpack(redis.call('HMGET', r, 'wt', 'wa', 'lu'))
  if t then
    redis.call('SREM', waitset(t), id)
    if wa then
      for _, c in ipairs(wait_also(wa)) do redis.call('SREM', waitset(c[2]), id) end
    end
    redis.call('HDEL', r, 'ss', 'ready', 'preq', 'act', 'qf', 'wk', 'wt', 'wn', 'wd', 'wa')
  else
    redis.call('HDEL', r, 'ss', 'ready', 'preq', 'act', 'qf')
  end
  redis.call('ZREM', leaseq(ru.wf, ru.ln), id)
  if st ~= 'running' then redis.call('ZREM', readyq(ru.wf, ru.ln), id) end
  index_status(ru, st, new)
  if ru.qf then redis.call('ZREM', queuedq(ru.qu), id) end
  -- LeaseUntil, kept to describe the last lease, ends now if it was later
  if lu and tonumber(lu) > NOW then
    redis.call('HSET', r, 'st', new, 'ua', NOWS, 'ea', NOWS, 'lu', NOWS, ...)
  else
    redis.call('HSET', r, 'st', new, 'ua', NOWS, 'ea', NOWS, ...)
  end
  redis.call('ZADD', fin_st(new), NOWS, id)
  redis.call('ZADD', fin_wf_st(new, ru.wf), NOWS, id)
  -- tells waiters in every process that the run ended (Finished)
  redis.call('PUBLISH', ended_channel(), id)
end

-- request_cancel records the cancellation of unfinished run id (hash r)
-- with the marked reason cq (the run hash's cq field, present once a
-- cancellation is requested) unless one is recorded already: the first
-- request wins. A waiting run that is not held becomes queued, ready now,
-- its wait kept registered; a paused one that is not held is ready now
-- for its resume; a queued or running one only records it (a running
-- run's holder learns of it from its next write). The caller checked
-- that the run exists and is unfinished.
local function request_cancel(r, id, cq)
  local st, old, hl, wf, qu, ln, pt, pr, qf = unpack(redis.call('HMGET', r,
    'st', 'cq', 'hl', 'wf', 'qu', 'ln', 'pt', 'pr', 'qf'))
  if old then return end
  if st == 'waiting' and not hl then
    local ru = run_of(id, wf, qu, ln, pt, pr, qf)
    ready_add(ru, NOWS)
    set_status(r, ru, st, 'queued', NOWS, 'ready', NOWS, 'cq', cq)
    WOKE = true
  elseif st == 'paused' and not hl then
    redis.call('HSET', r, 'cq', cq, 'ready', NOWS, 'ua', NOWS)
  else
    redis.call('HSET', r, 'cq', cq, 'ua', NOWS)
  end
end

-- terminate_children terminates, with error JSON err, every unfinished
-- descendant of run id that terminates with its parent, appending their
-- IDs to the list ids: it walks the children indexes from the run, breadth
-- first and each run's children in ID order, descending through every
-- child of the default policy, finished or not, and never into one that
-- abandons its parent. An unfinished child that is cancelled with its
-- parent, reached so, has its cancellation requested with the marked
-- reason cq (request_cancel) instead, and its own children are left to
-- its ending. It reads the children indexes as it goes, so a run's
-- descendants need not be named in KEYS (as for every key this store's
-- prefix builds, they share the prefix's slot).
local function terminate_children(id, err, cq, ids)
  local queue, seen, i = {id}, {[id] = true}, 1
  while i <= #queue do
    local kids = redis.call('ZRANGE', chkey(queue[i]), 0, -1)
    i = i + 1
    for _, k in ipairs(kids) do
      if not seen[k] then
        seen[k] = true
        local kr = rkey(k)
        local kst, kwf, kpp, kqu, kln, kpt, kpr, kqf = unpack(redis.call('HMGET', kr, 'st', 'wf', 'pp', 'qu', 'ln', 'pt', 'pr', 'qf'))
        if kst and kpp == 'cancel' then
          if not finished(kst) then request_cancel(kr, k, cq) end
        elseif kst and (not kpp or kpp == '') then
          if not finished(kst) then
            redis.call('HSET', kr, 'err', err)
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

-- terminate_run terminates unfinished run ru (hash r, status st) with
-- error JSON err and ends its execution, as Terminate does, appending its
-- ID to the list ids; with a descendants' error JSON cerr ('' leaves
-- them alone) it terminates its unfinished descendants that terminate
-- with their parent, and requests with the marked reason cq the
-- cancellation of those cancelled with it (terminate_children),
-- appending the IDs it terminates. The caller checked that the run
-- exists and is unfinished.
local function terminate_run(r, ru, st, err, cerr, cq, ids)
  redis.call('HSET', r, 'err', err)
  redis.call('HDEL', r, 'out')
  finish(r, ru, st, 'terminated')
  ids[#ids + 1] = ru.id
  if cerr ~= '' then terminate_children(ru.id, cerr, cq, ids) end
end

-- queue_count counts the runs of queue qu in status st: its own index's,
-- or for the default queue, which has none, all runs' less every other
-- queue's (the queues runs were ever created on, qn).
local function queue_count(qu, st)
  if qu ~= 'default' then return redis.call('ZCARD', idx_q_st(st, qu)) end
  local n = redis.call('ZCARD', idx_st(st))
  for _, o in ipairs(redis.call('SMEMBERS', queue_names())) do
    n = n - redis.call('ZCARD', idx_q_st(st, o))
  end
  return n
end
