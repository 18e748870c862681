-- Shared helpers: a create with a start policy, an event or a start key
-- (CreateRuns with NewRun.OnExisting, OnEnded, Event or Key), which
-- judges them in the same script that creates.
-- KEYS and ARGV: none read; the callers pass each run's fields.

-- start_run creates, joins or refuses run hash r from the 25 entries of
-- a after a[b]: the thirteen new_run reads (id, workflow, ...), then the
-- lease's owner ('' for none) and length (µs), the policy for an
-- existing run ('', fail, replace) and for an ended one ('', reuse,
-- reject, reuse-failed), the replacement's error JSON, descendants'
-- error JSON and marked cancellation reason, the event's topic ('' for
-- none) and marked payload, the start key ('' for none), its debounce
-- window (µs, '' for none) and '1' to keep the window's first input.
--
-- In order: a start key whose holder (the run its record names, which
-- holds the key, sk, of the workflow) is unfinished, for a singleton, or
-- queued and ready after now, for a debounce window, is joined: the
-- create writes no run, and unless it keeps the first input the
-- holder's input, headers and search attributes become the create's
-- (the attributes a run has from its start are its input's). Otherwise the run
-- with the ID, if any, is returned as it is, refuses the create, or is
-- replaced (replace_run) after its family was found to allow it
-- (family_of), before any write; when no run has the ID now, the run is
-- created (leased when it has a lease; ready at the end of its debounce
-- window when it has one) and holds the key. The event goes to the run
-- the create leaves, delivered or buffered as SendEvent's (send); a
-- refused create delivers nothing.
--
-- It returns {created (1 or 0), the ID of the run the result describes
-- (the key's holder when joined), the replaced run's status ('' when
-- none was replaced), joined (1 or 0), the refusal ('' for none),
-- delivered (1 or 0)}.
local function start_run(r, a, b)
  local id, wf = a[b + 1], a[b + 2]
  local topic, payload = a[b + 21], a[b + 22]
  local key, deb = a[b + 23], a[b + 24]
  local sk = nil
  if key ~= '' then
    sk = startkey(wf, key)
    local holder = redis.call('GET', sk)
    if holder then
      local hr = rkey(holder)
      local hst, hwf, hsk, hready = unpack(redis.call('HMGET', hr, 'st', 'wf', 'sk', 'ready'))
      local joined = false
      if hst and hwf == wf and hsk == key then
        if deb == '' then
          joined = not finished(hst)
        else
          joined = hst == 'queued' and hready and tonumber(hready) > NOW
        end
      end
      if joined then
        if deb ~= '' and a[b + 25] ~= '1' then
          redis.call('HSET', hr, 'in', a[b + 5], 'ua', NOWS)
          if a[b + 12] ~= '' then
            redis.call('HSET', hr, 'hd', a[b + 12])
          else
            redis.call('HDEL', hr, 'hd')
          end
          local old, at = redis.call('HGET', hr, 'at'), a[b + 13]
          if (old or '') ~= at then
            attrs_drop(holder, old)
            if at ~= '' then
              attrs_add(holder, redis.call('HGET', hr, 'ca'), at)
              redis.call('HSET', hr, 'at', at)
            else
              redis.call('HDEL', hr, 'at')
            end
          end
        end
        local sent = 0
        if topic ~= '' then sent = send(holder, topic, payload) end
        return {0, holder, '', 1, '', sent}
      end
    end
  end
  local st = redis.call('HGET', r, 'st')
  local tok, was = nil, ''
  if st then
    local replace, refusal = false, nil
    if not finished(st) then
      local pol = a[b + 16]
      if pol == 'fail' then refusal = 'exists' elseif pol == 'replace' then replace = true end
    else
      local pol = a[b + 17]
      if pol == 'reuse' then
        replace = true
      elseif pol == 'reject' or pol == 'reuse-failed' and st == 'complete' then
        refusal = 'ended'
      elseif pol == 'reuse-failed' then
        replace = true
      elseif topic ~= '' then
        -- an ended run returned leaves no run to deliver the event to
        refusal = 'ended'
      end
    end
    if refusal then return {0, id, '', 0, refusal, 0} end
    if not replace then
      local sent = 0
      if topic ~= '' then sent = send(id, topic, payload) end
      return {0, id, '', 0, '', sent}
    end
    local fam, last = family_of(id)
    if not fam then return {0, id, '', 0, 'family', 0} end
    tok = replace_run(r, id, st, fam, last, a[b + 18], a[b + 19], a[b + 20])
    was = st
  end
  if a[b + 14] ~= '' then
    create_leased(r, a, b, a[b + 14], tonumber(a[b + 15]), tok)
  elseif deb ~= '' then
    create_run(r, a, b, tok, f(NOW + tonumber(deb)))
  else
    create_run(r, a, b, tok)
  end
  if sk then
    redis.call('SET', sk, id)
    redis.call('HSET', r, 'sk', key)
  end
  if topic ~= '' then send(id, topic, payload) end
  return {1, id, was, 0, '', 0}
end
