-- Shared helpers: a run and its descendants as one, for Purge and for the
-- replacements of a create's start policy (lib/start.lua): walking the
-- family, deleting a run with everything it owns, replacing a run.
-- KEYS and ARGV: none read; the callers pass the runs' IDs and fields.

-- drop_run deletes run id, whose hash holds status st, workflow wf,
-- execution ex, parent pa, queue qu and start key sk (the last three nil
-- when it has none), with every key it owns: its hash, checkpoints,
-- attempts, executions, every ended execution's checkpoints and
-- attempts, and its buffered events (through its set of topics). It
-- takes it out of the listing indexes, the finished indexes and its
-- parent's children index, and deletes the record of its start key when
-- that names it. Its own children index stays: Purge leaves the children,
-- still listed by its ID. The run is finished, so it is in no ready,
-- lease, wait or queued set. It returns the number of buffered events
-- deleted.
local function drop_run(id, st, wf, ex, pa, qu, sk)
  local events = 0
  for _, t in ipairs(redis.call('SMEMBERS', evtopics(id))) do
    local k = evkey(id, t)
    events = events + redis.call('LLEN', k)
    redis.call('UNLINK', k)
  end
  for n = 1, tonumber(ex or '1') - 1 do redis.call('UNLINK', cxkey(n, id), axkey(n, id)) end
  redis.call('UNLINK', rkey(id), ckey(id), akey(id), xkey(id), evtopics(id))
  redis.call('ZREM', idx_all(), id)
  redis.call('ZREM', idx_wf(wf), id)
  redis.call('ZREM', idx_st(st), id)
  redis.call('ZREM', idx_wf_st(st, wf), id)
  redis.call('ZREM', fin_st(st), id)
  redis.call('ZREM', fin_wf_st(st, wf), id)
  if qu then
    redis.call('ZREM', idx_q(qu), id)
    redis.call('ZREM', idx_q_st(st, qu), id)
  end
  if pa and pa ~= '' then redis.call('ZREM', chkey(pa), id) end
  if sk then
    local k = startkey(wf, sk)
    if redis.call('GET', k) == id then redis.call('DEL', k) end
  end
  return events
end

-- family_of returns the descendants of run id (children, their children,
-- and so on, through the children indexes), breadth first and each run's
-- children in ID order, through every one whatever its status or parent
-- policy; or nil when one of them refuses the run's replacement: an
-- unfinished descendant whose parent policy is not terminate (abandon or
-- cancel), which would outlive the run. It only reads, so a caller calls
-- it before its first write. A child whose run is gone (purged) is left
-- out, and its own children with it, as a walk by parent ID would.
local function family_of(id)
  local queue, seen, out, i = {id}, {[id] = true}, {}, 1
  while i <= #queue do
    local kids = redis.call('ZRANGE', chkey(queue[i]), 0, -1)
    i = i + 1
    for _, k in ipairs(kids) do
      if not seen[k] then
        seen[k] = true
        local st, pp = unpack(redis.call('HMGET', rkey(k), 'st', 'pp'))
        if st then
          if pp and pp ~= '' and not finished(st) then return nil end
          out[#out + 1] = k
          queue[#queue + 1] = k
        end
      end
    end
  end
  return out
end

-- replace_run ends and deletes run id (hash r, status st) and its
-- descendants fam (family_of, which found none refusing it), so that a
-- new run can take the ID: an unfinished run is terminated with error
-- JSON err as Terminate does with the descendants' error JSON cerr and
-- the marked reason cq (terminate_run); an ended one's descendants that
-- terminate with it are terminated with cerr (terminate_children). A
-- descendant the cascade did not reach (below a child that abandons its
-- parent) and that is still unfinished, so terminates with its own
-- parent, is terminated with cerr too: every run deleted has ended, and
-- its end is announced. Then each is deleted with everything it owns
-- (drop_run) and its children index with it, since its children go too.
-- It returns the run's last lease token, which the new run's tokens
-- continue, so that the old run's lease holder never holds the new one.
local function replace_run(r, id, st, fam, err, cerr, cq)
  local ids = {}
  if not finished(st) then
    terminate_run(r, run_info(r, id), st, err, cerr, cq, ids)
  else
    terminate_children(id, cerr, cq, ids)
  end
  for _, k in ipairs(fam) do
    local kr = rkey(k)
    local kst = redis.call('HGET', kr, 'st')
    if not finished(kst) then
      redis.call('HSET', kr, 'err', cerr)
      redis.call('HDEL', kr, 'out')
      finish(kr, run_info(kr, k), kst, 'terminated')
    end
  end
  local tok = redis.call('HGET', r, 'tok') or '0'
  fam[#fam + 1] = id
  for _, k in ipairs(fam) do
    local kst, kwf, kex, kpa, kqu, ksk = unpack(redis.call('HMGET', rkey(k), 'st', 'wf', 'ex', 'pa', 'qu', 'sk'))
    drop_run(k, kst, kwf, kex, kpa, kqu, ksk)
    redis.call('UNLINK', chkey(k))
  end
  return tok
end
