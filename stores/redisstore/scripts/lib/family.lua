-- Shared helpers: a run and its descendants as one, for Purge and for the
-- replacements of a create's start policy (lib/start.lua): walking the
-- family, deleting a run with everything it owns, replacing a run.
-- KEYS and ARGV: none read; the callers pass the runs' IDs and fields.

-- drop_run deletes run id, whose hash holds status st, workflow wf,
-- execution ex, parent pa, queue qu and start key sk (the last three nil
-- when it has none), with every key it owns: its hash, checkpoints,
-- attempts, executions, every ended execution's checkpoints and
-- attempts, its buffered events (through its set of topics), its updates
-- and replies, and its streams (through its stream metadata). It takes
-- it out of the listing indexes, the indexes by creation, its search
-- attributes' indexes, the finished indexes and its
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
  for _, s in ipairs(redis.call('HKEYS', smkey(id))) do redis.call('UNLINK', svkey(id, s)) end
  local at = redis.call('HGET', rkey(id), 'at')
  if at then attrs_drop(id, at) end
  redis.call('UNLINK', rkey(id), ckey(id), akey(id), xkey(id), evtopics(id),
    upkey(id), urkey(id), ulkey(id), smkey(id))
  redis.call('ZREM', idx_all(), id)
  redis.call('ZREM', idx_wf(wf), id)
  redis.call('ZREM', idx_created(), id)
  redis.call('ZREM', idx_wf_created(wf), id)
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
-- cancel), which would outlive the run. It returns too, for each
-- descendant that was ever claimed (its token above 0), its last token
-- and lease expiry (µs, nil for none), read in the same call as its
-- status, before the replacement ends its lease: ID → {token, expiry}
-- (see keep_token). It only reads, so a caller calls it before its
-- first write. A child whose run is gone (purged) is left out, and its
-- own children with it, as a walk by parent ID would.
local function family_of(id)
  local queue, seen, out, last, i = {id}, {[id] = true}, {}, {}, 1
  while i <= #queue do
    local kids = redis.call('ZRANGE', chkey(queue[i]), 0, -1)
    i = i + 1
    for _, k in ipairs(kids) do
      if not seen[k] then
        seen[k] = true
        local st, pp, tok, lu = unpack(redis.call('HMGET', rkey(k), 'st', 'pp', 'tok', 'lu'))
        if st then
          if pp and pp ~= '' and not finished(st) then return nil end
          out[#out + 1] = k
          queue[#queue + 1] = k
          if tok and tonumber(tok) > 0 then last[k] = {tok, lu} end
        end
      end
    end
  end
  return out, last
end

-- keep_token keeps token tok, the last lease token of run id, which a
-- replacement deletes (a descendant of the run replaced), under tokkey(id):
-- the next run created under the ID goes on from it (new_run), so that a
-- holder of the deleted run's lease, which may not have heard yet that
-- it lost it, never matches that run's lease (a new parent starts its
-- children under the IDs they had before). A key there already, left
-- by a run of the ID deleted earlier and not consumed by code that
-- predates these keys, is kept if its token is greater. The key expires
-- a day after the deleted run's lease (until lu, µs, nil for none) would
-- have ended, so that the keys of IDs no run takes again do not pile up
-- (they are at most a day's replaced descendants), while a holder is
-- fenced far longer than it can act on its lease: its writes and
-- heartbeats, a second apart by default, find the run gone and stop it.
-- A holder cut off from the store for more than a day past its lease is
-- the one not guarded against, as none is after Purge deletes a run.
local function keep_token(id, tok, lu)
  local k = tokkey(id)
  local old = redis.call('GET', k)
  if old and tonumber(old) > tonumber(tok) then tok = old end
  local ms = 86400000
  if lu and tonumber(lu) > NOW then ms = ms + math.ceil((tonumber(lu) - NOW) / 1000) end
  redis.call('SET', k, tok, 'PX', f(ms))
end

-- replace_run ends and deletes run id (hash r, status st) and its
-- descendants fam with their last tokens last (family_of, which found
-- none refusing it), so that a new run can take the ID: an unfinished
-- run is terminated with error JSON err as Terminate does with the
-- descendants' error JSON cerr and the marked reason cq
-- (terminate_run); an ended one's descendants that terminate with it
-- are terminated with cerr (terminate_children). A descendant the
-- cascade did not reach (below a child that abandons its parent) and
-- that is still unfinished, so terminates with its own parent, is
-- terminated with cerr too: every run deleted has ended, and
-- its end is announced. Then each is deleted with everything it owns
-- (drop_run) and its children index with it, since its children go too,
-- and the last token of each descendant that was ever claimed is kept
-- for the next run of its ID (keep_token). It returns the run's last
-- lease token, which the new run's tokens continue, so that the old
-- run's lease holder never holds the new one.
local function replace_run(r, id, st, fam, last, err, cerr, cq)
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
    if last[k] then keep_token(k, last[k][1], last[k][2]) end
  end
  return tok
end
