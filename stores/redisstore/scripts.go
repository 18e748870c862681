package redisstore

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// Every script is a header, the helpers its body uses, the body (which
// defines main) and the epilogue; see newScript.
//
// The "#!lua" shebang makes Redis 7 treat each script as one that may write,
// so the server refuses it up front when out of memory instead of failing a
// write halfway through (a script does not roll back). Each body validates
// everything it needs before its first write for the same reason.
//
// Conventions: ARGV[1] is the key prefix, ARGV[2] the clock override in
// microseconds since the epoch ("" means the server's TIME). Every time is
// an integer number of microseconds, formatted with f() before it reaches a
// command: Lua's own number-to-string conversion keeps 14 digits only.
// Replies start with a status word (OK, NOTFOUND, INVALID, LEASELOST, ...).
const header = `#!lua
local P = ARGV[1]
local WOKE = false
`

// clockHelper is included when a script reads the clock.
const clockHelper = `
local NOW
if ARGV[2] ~= '' then
  NOW = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local NOWS = string.format('%.0f', NOW)
`

// luaHelper is a local function a script body may call.
type luaHelper struct {
	name string
	src  string
}

// helpers in definition order: each may call only those before it. A script
// gets only the helpers it uses, because Redis runs a script's whole text on
// every call and each local function costs a closure allocation.
var helpers = []luaHelper{
	{"f", `local function f(n) return string.format('%.0f', n) end`},
	{"rkey", `local function rkey(id) return P .. 'r:' .. id end`},
	{"ckey", `local function ckey(id) return P .. 'c:' .. id end`},
	{"readyq", `local function readyq(wf) return P .. 'q:' .. wf end`},
	{"leaseq", `local function leaseq(wf) return P .. 'l:' .. wf end`},
	{"waitset", `local function waitset(topic) return P .. 'w:' .. topic end`},
	{"evkey", `local function evkey(id, topic) return P .. 'e:' .. #id .. ':' .. id .. ':' .. topic end`},
	{"finished", `local function finished(st)
  return st == 'complete' or st == 'errored' or st == 'terminated'
end`},
	{"wait_kind", `local function wait_kind(k)
  if not k or k == '' then return 'event' end
  return k
end`},
	// index_status moves run id between the listing indexes of its status;
	// the caller writes the status field itself.
	{"index_status", `local function index_status(id, wf, old, new)
  if old == new then return end
  if old then
    redis.call('ZREM', P .. 'is:' .. old, id)
    redis.call('ZREM', P .. 'iws:' .. old .. ':' .. wf, id)
  end
  redis.call('ZADD', P .. 'is:' .. new, 0, id)
  redis.call('ZADD', P .. 'iws:' .. new .. ':' .. wf, 0, id)
end`},
	{"set_status", `local function set_status(r, id, wf, old, new)
  index_status(id, wf, old, new)
  redis.call('HSET', r, 'st', new, 'ua', NOWS)
end`},
	// clear_wait drops the run's registered event wait, if any.
	{"clear_wait", `local function clear_wait(r, id)
  local t = redis.call('HGET', r, 'wt')
  if t then
    redis.call('SREM', waitset(t), id)
    redis.call('HDEL', r, 'wk', 'wt', 'wn', 'wd')
  end
end`},
	// put_cp writes a checkpoint the caller knows is absent and returns its
	// encoding: seq \n created \n kind \n error-json \n marked-output. The
	// caller resets the run's recovery count.
	{"put_cp", `local function put_cp(r, c, key, kind, err, out)
  local seq = redis.call('HINCRBY', r, 'seq', 1)
  local b = f(seq) .. '\n' .. NOWS .. '\n' .. kind .. '\n' .. err .. '\n' .. out
  redis.call('HSET', c, key, b)
  return b
end`},
	// write_cp writes the checkpoint of key unless one exists; it returns
	// the stored encoding.
	{"write_cp", `local function write_cp(r, c, key, kind, err, out)
  local old = redis.call('HGET', c, key)
  if old then return old end
  local b = put_cp(r, c, key, kind, err, out)
  redis.call('HSET', r, 'rec', '0')
  return b
end`},
	// extend renews the lease of a running run to now+lf.
	{"extend", `local function extend(r, id, wf, lf)
  local lu = f(NOW + lf)
  redis.call('HSET', r, 'lu', lu, 'ua', NOWS)
  redis.call('ZADD', leaseq(wf), lu, id)
end`},
	// release ends the run's lease: it leaves the lease set, and LeaseUntil
	// (kept with Owner and Token to describe the last lease) becomes now if
	// it was later.
	{"release", `local function release(r, id, wf)
  redis.call('ZREM', leaseq(wf), id)
  local lu = redis.call('HGET', r, 'lu')
  if lu and tonumber(lu) > NOW then redis.call('HSET', r, 'lu', NOWS) end
end`},
	// deliver resolves the registered wait of run id with payload: the
	// payload becomes the checkpoint of the wait's key, the wait is dropped,
	// and a waiting run is queued (a paused one stays paused, ready now).
	{"deliver", `local function deliver(id, payload)
  local r = rkey(id)
  local st, wf, wk, wn, ready = unpack(redis.call('HMGET', r, 'st', 'wf', 'wk', 'wn', 'ready'))
  write_cp(r, ckey(id), wk, wait_kind(wn), '', payload)
  clear_wait(r, id)
  if st == 'waiting' or st == 'queued' then
    set_status(r, id, wf, st, 'queued')
    if not ready or tonumber(ready) > NOW then
      redis.call('HSET', r, 'ready', NOWS)
      redis.call('ZADD', readyq(wf), NOWS, id)
    end
    WOKE = true
  elseif st == 'paused' then
    redis.call('HSET', r, 'ready', NOWS)
  end
  redis.call('HSET', r, 'ua', NOWS)
end`},
	// send delivers an event to one existing, unfinished run: as a delivery
	// when it waits on the topic, else buffered in order.
	{"send", `local function send(id, topic, payload)
  if redis.call('HGET', rkey(id), 'wt') == topic then
    deliver(id, payload)
    return 1
  end
  redis.call('RPUSH', evkey(id, topic), payload)
  return 0
end`},
	// send_check reports why an event cannot be sent to run id, or nil.
	{"send_check", `local function send_check(id)
  local st = redis.call('HGET', rkey(id), 'st')
  if not st then return 'NOTFOUND' end
  if finished(st) then return 'INVALID' end
  return nil
end`},
	// once_get and once_put make a script safe to repeat: go-redis sends a
	// command again when its reply was lost (a read timeout, a dropped
	// connection), and a repeated SendEvent must not buffer the event twice.
	// The caller's operation ID keys the first reply for a minute, longer
	// than the client's retries take.
	{"once_get", `local function once_get(op)
  local prev = redis.call('GET', P .. 'op:' .. op)
  if prev then return cmsgpack.unpack(prev) end
  return nil
end`},
	{"once_put", `local function once_put(op, res)
  redis.call('SET', P .. 'op:' .. op, cmsgpack.pack(res), 'PX', 60000)
  return res
end`},
	// fence checks a fenced script's lease: KEYS[1] is the run hash, ARGV[3]
	// the token. It returns an error reply, or nil and the run's fields. An
	// unknown run has no lease to hold: LEASELOST, as for any holder whose
	// run went away.
	{"fence", `local function fence()
  local st, tok, wf, wk, preq = unpack(redis.call('HMGET', KEYS[1], 'st', 'tok', 'wf', 'wk', 'preq'))
  if not st or st ~= 'running' or tok ~= ARGV[3] then return {'LEASELOST'} end
  return nil, st, wf, wk, preq
end`},
	// finish clears what a finished run no longer has: lease, wait,
	// schedule, suspend state and pause request.
	{"finish", `local function finish(r, id, wf, st, new)
  clear_wait(r, id)
  redis.call('HDEL', r, 'ss', 'ready', 'preq')
  release(r, id, wf)
  redis.call('ZREM', readyq(wf), id)
  set_status(r, id, wf, st, new)
end`},
}

const epilogue = `
local res = main()
if WOKE then redis.call('PUBLISH', P .. 'wake', '1') end
return res
`

func newScript(body string) *redis.Script { return redis.NewScript(assemble(body)) }

// assemble builds a script's text: the header, the clock when the script
// reads it, the helpers the body uses (directly or through other helpers),
// the body and the epilogue.
func assemble(body string) string {
	used := make([]bool, len(helpers))
	text := body
	for changed := true; changed; {
		changed = false
		for i := len(helpers) - 1; i >= 0; i-- {
			if !used[i] && callsHelper(text, helpers[i].name) {
				used[i] = true
				text += helpers[i].src
				changed = true
			}
		}
	}
	var b strings.Builder
	b.WriteString(header)
	if strings.Contains(text, "NOW") {
		b.WriteString(clockHelper)
	}
	for i, h := range helpers {
		if used[i] {
			b.WriteString(h.src)
			b.WriteByte('\n')
		}
	}
	b.WriteString(body)
	b.WriteString(epilogue)
	return b.String()
}

// callsHelper reports whether Lua text calls the named function.
func callsHelper(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name+"(")
		if j < 0 {
			return false
		}
		j += i
		if j == 0 || !isIdentByte(text[j-1]) {
			return true
		}
		i = j + 1
	}
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// createScript inserts runs. KEYS: the run hashes. ARGV[3...]: per run
// id, workflow, parent, marked input. Reply: per run {created, HGETALL}.
var createScript = newScript(`
local function main()
  local out = {}
  for i = 1, #KEYS do
    local r = KEYS[i]
    local b = 2 + (i - 1) * 4
    local id, wf, parent, input = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
    if redis.call('EXISTS', r) == 1 then
      out[i] = {0, redis.call('HGETALL', r)}
    else
      redis.call('HSET', r, 'id', id, 'wf', wf, 'pa', parent, 'in', input,
        'ready', NOWS, 'tok', '0', 'rec', '0', 'seq', '0', 'ca', NOWS)
      redis.call('ZADD', P .. 'ia', 0, id)
      redis.call('ZADD', P .. 'iw:' .. wf, 0, id)
      set_status(r, id, wf, nil, 'queued')
      redis.call('ZADD', readyq(wf), NOWS, id)
      WOKE = true
      out[i] = {1, redis.call('HGETALL', r)}
    end
  end
  return out
end
`)

// listScript reads one page of an index. KEYS[1]: the index. ARGV[3]: the
// lexicographic start, ARGV[4]: how many. Reply: HGETALL per run.
var listScript = newScript(`
local function main()
  local ids = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[3], '+', 'LIMIT', 0, tonumber(ARGV[4]))
  local out = {}
  for i, id in ipairs(ids) do
    out[i] = redis.call('HGETALL', rkey(id))
  end
  return out
end
`)

// stepsScript reads a run's checkpoints and, when ARGV[3] is "1", its
// attempts, consistently. KEYS: run, checkpoints, attempts.
// Reply: {NOTFOUND} | {OK, HGETALL checkpoints, attempts}.
var stepsScript = newScript(`
local function main()
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'NOTFOUND'} end
  local atts = {}
  if ARGV[3] == '1' then atts = redis.call('LRANGE', KEYS[3], 0, -1) end
  return {'OK', redis.call('HGETALL', KEYS[2]), atts}
end
`)

// claimScript leases ready runs and runs whose lease expired. ARGV[3]:
// owner, ARGV[4]: limit, ARGV[5]: lease length, ARGV[6...]: workflows
// KEYS: the ready and lease sets of those workflows.
// Reply: per claimed run {id, token, HMGET of its claim fields}.
var claimScript = newScript(`
local function main()
  local owner, limit, lf = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  local wfs = {}
  for i = 6, #ARGV do wfs[#wfs + 1] = ARGV[i] end
  local cands = {}
  for _, wf in ipairs(wfs) do
    local q = redis.call('ZRANGEBYSCORE', readyq(wf), '-inf', NOWS, 'WITHSCORES', 'LIMIT', 0, limit)
    for j = 1, #q, 2 do cands[#cands + 1] = {q[j], tonumber(q[j + 1]), wf, false} end
    local l = redis.call('ZRANGEBYSCORE', leaseq(wf), '-inf', NOWS, 'WITHSCORES', 'LIMIT', 0, limit)
    for j = 1, #l, 2 do cands[#cands + 1] = {l[j], tonumber(l[j + 1]), wf, true} end
  end
  table.sort(cands, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[1] < b[1]
  end)
  local lu = f(NOW + lf)
  local out = {}
  for i = 1, #cands do
    if #out >= limit then break end
    local id, wf, expired = cands[i][1], cands[i][3], cands[i][4]
    local r = rkey(id)
    local st, rec = unpack(redis.call('HMGET', r, 'st', 'rec'))
    local ok
    if expired then ok = (st == 'running') else ok = (st == 'queued' or st == 'waiting') end
    if ok then
      rec = tonumber(rec or '0')
      if expired then rec = rec + 1 end
      local tok = redis.call('HINCRBY', r, 'tok', 1)
      redis.call('HSET', r, 'st', 'running', 'own', owner, 'lu', lu, 'rec', f(rec), 'ua', NOWS)
      redis.call('HDEL', r, 'ready')
      if not expired then redis.call('ZREM', readyq(wf), id) end
      redis.call('ZADD', leaseq(wf), lu, id)
      index_status(id, wf, st, 'running')
      out[#out + 1] = {id, tok, redis.call('HMGET', r, 'wf', 'pa', 'in', 'rec', 'ss', 'wk', 'wt', 'wn', 'wd', 'lu')}
    else
      -- not claimable after all: an index entry out of step with the run
      redis.call('ZREM', readyq(wf), id)
      if st ~= 'running' then redis.call('ZREM', leaseq(wf), id) end
    end
  end
  return out
end
`)

// checkpointScript writes a step's checkpoint under the lease. KEYS: run,
// checkpoints, attempts. ARGV[3]: token, [4]: lease length, [5]: run id,
// [6]: key, [7]: kind, [8]: error JSON, [9]: marked output, [10...]:
// encoded attempts. Reply: {OK} | {PAUSED} | {EXISTS, encoding}.
var checkpointScript = newScript(`
local function main()
  local bad, st, wf, wk, preq = fence()
  if bad then return bad end
  local r, c, a, id, lf, key = KEYS[1], KEYS[2], KEYS[3], ARGV[5], tonumber(ARGV[4]), ARGV[6]
  local old = redis.call('HGET', c, key)
  local lu = f(NOW + lf)
  redis.call('ZADD', leaseq(wf), lu, id)
  if old then
    redis.call('HSET', r, 'lu', lu, 'ua', NOWS)
    return {'EXISTS', old}
  end
  put_cp(r, c, key, ARGV[7], ARGV[8], ARGV[9])
  redis.call('HSET', r, 'lu', lu, 'ua', NOWS, 'rec', '0')
  if #ARGV >= 10 then redis.call('RPUSH', a, unpack(ARGV, 10)) end
  if wk == key then clear_wait(r, id) end
  if preq then
    redis.call('HDEL', r, 'preq')
    redis.call('HSET', r, 'ready', NOWS)
    release(r, id, wf)
    set_status(r, id, wf, st, 'paused')
    return {'PAUSED'}
  end
  return {'OK'}
end
`)

// attemptsScript appends attempts and extends the lease (a heartbeat when
// there are none). KEYS: run, attempts. ARGV[3]: token, [4]: lease length,
// [5]: run id, [6...]: encoded attempts. Reply: {OK}.
var attemptsScript = newScript(`
local function main()
  local bad, st, wf = fence()
  if bad then return bad end
  if #ARGV >= 6 then redis.call('RPUSH', KEYS[2], unpack(ARGV, 6)) end
  extend(KEYS[1], ARGV[5], wf, tonumber(ARGV[4]))
  return {'OK'}
end
`)

// suspendScript parks a running run. KEYS: run, checkpoints. ARGV[3]:
// token, [4]: lease length, [5]: run id, [6]: "1" when a checkpoint is
// given, [7..10]: its key, kind, error JSON, marked output, [11]: "1" when
// a wait is given, [12..15]: its key, topic, kind, deadline, [16]: ready
// time ("" for none), [17]: marked suspend state.
// Reply: {PARKED} | {PAUSED} | {DELIVERED, encoding}.
var suspendScript = newScript(`
local function main()
  local bad, st, wf, wk, preq = fence()
  if bad then return bad end
  local r, c, lf, id = KEYS[1], KEYS[2], tonumber(ARGV[4]), ARGV[5]
  redis.call('HSET', r, 'ua', NOWS)
  if ARGV[6] == '1' then write_cp(r, c, ARGV[7], ARGV[8], ARGV[9], ARGV[10]) end
  if ARGV[11] == '1' then
    local key, topic, kind, deadline = ARGV[12], ARGV[13], ARGV[14], ARGV[15]
    local have = redis.call('HGET', c, key)
    if not have then
      local ev = redis.call('LPOP', evkey(id, topic))
      if ev then have = write_cp(r, c, key, wait_kind(kind), '', ev) end
    end
    if have then
      if lf > 0 then extend(r, id, wf, lf) end
      return {'DELIVERED', have}
    end
    clear_wait(r, id)
    redis.call('HSET', r, 'wk', key, 'wt', topic, 'wn', kind)
    if deadline ~= '' then redis.call('HSET', r, 'wd', deadline) end
    redis.call('SADD', waitset(topic), id)
  end
  release(r, id, wf)
  if ARGV[17] == '' then redis.call('HDEL', r, 'ss') else redis.call('HSET', r, 'ss', ARGV[17]) end
  local ready = ARGV[16]
  if ready == '' then redis.call('HDEL', r, 'ready') else redis.call('HSET', r, 'ready', ready) end
  if preq then
    redis.call('HDEL', r, 'preq')
    set_status(r, id, wf, st, 'paused')
    return {'PAUSED'}
  end
  if ready ~= '' and tonumber(ready) <= NOW then
    set_status(r, id, wf, st, 'queued')
    WOKE = true
  else
    set_status(r, id, wf, st, 'waiting')
  end
  if ready ~= '' then redis.call('ZADD', readyq(wf), ready, id) end
  return {'PARKED'}
end
`)

// completeScript finishes a run under its lease. KEYS: run. ARGV[3]:
// token, [4]: unused, [5]: run id, [6]: status, [7]: marked output, [8]:
// error JSON, [9..11]: notify run id ("" for none), topic, marked payload.
// Reply: {OK, notified} where notified is 1 delivered, 0 buffered, -1
// target not found, -2 target finished (nothing sent).
var completeScript = newScript(`
local function main()
  local bad, st, wf = fence()
  if bad then return bad end
  local r, id = KEYS[1], ARGV[5]
  local nid = ARGV[9]
  local nres = 0
  if nid ~= '' then
    local why = send_check(nid)
    if why == 'NOTFOUND' then nres = -1 elseif why == 'INVALID' or nid == id then nres = -2 end
  end
  redis.call('HSET', r, 'out', ARGV[7], 'err', ARGV[8])
  finish(r, id, wf, st, ARGV[6])
  if nid ~= '' and nres == 0 then nres = send(nid, ARGV[10], ARGV[11]) end
  return {'OK', nres}
end
`)

// terminateScript ends an unfinished run. KEYS: run. ARGV[3]: run id,
// [4]: error JSON, [5..7]: notify as in completeScript.
var terminateScript = newScript(`
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf = unpack(redis.call('HMGET', r, 'st', 'wf'))
  if not st then return {'NOTFOUND'} end
  if finished(st) then return {'INVALID'} end
  local nid = ARGV[5]
  local nres = 0
  if nid ~= '' then
    local why = send_check(nid)
    if why == 'NOTFOUND' then nres = -1 elseif why == 'INVALID' or nid == id then nres = -2 end
  end
  redis.call('HSET', r, 'err', ARGV[4])
  redis.call('HDEL', r, 'out')
  finish(r, id, wf, st, 'terminated')
  if nid ~= '' and nres == 0 then nres = send(nid, ARGV[6], ARGV[7]) end
  return {'OK', nres}
end
`)

// pauseScript pauses a run. KEYS: run. ARGV[3]: run id.
var pauseScript = newScript(`
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf = unpack(redis.call('HMGET', r, 'st', 'wf'))
  if not st then return {'NOTFOUND'} end
  if finished(st) then return {'INVALID'} end
  if st == 'paused' then return {'OK'} end
  if st == 'running' then
    if redis.call('HEXISTS', r, 'preq') == 1 then return {'OK'} end
    redis.call('HSET', r, 'preq', '1', 'ua', NOWS)
    return {'OK'}
  end
  redis.call('ZREM', readyq(wf), id)
  set_status(r, id, wf, st, 'paused')
  return {'OK'}
end
`)

// resumeScript undoes a pause. KEYS: run. ARGV[3]: run id.
var resumeScript = newScript(`
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf, ready, preq = unpack(redis.call('HMGET', r, 'st', 'wf', 'ready', 'preq'))
  if not st then return {'NOTFOUND'} end
  if st == 'running' and preq then
    redis.call('HDEL', r, 'preq')
    redis.call('HSET', r, 'ua', NOWS)
    return {'OK'}
  end
  if st ~= 'paused' then return {'INVALID'} end
  if ready and tonumber(ready) <= NOW then
    set_status(r, id, wf, st, 'queued')
    WOKE = true
  else
    set_status(r, id, wf, st, 'waiting')
  end
  if ready then redis.call('ZADD', readyq(wf), ready, id) end
  return {'OK'}
end
`)

// restartScript runs a run again from the top. KEYS: run, checkpoints,
// attempts. ARGV[3]: run id.
var restartScript = newScript(`
local function main()
  local r, id = KEYS[1], ARGV[3]
  local st, wf = unpack(redis.call('HMGET', r, 'st', 'wf'))
  if not st then return {'NOTFOUND'} end
  redis.call('DEL', KEYS[2], KEYS[3])
  clear_wait(r, id)
  redis.call('HDEL', r, 'ss', 'out', 'err', 'preq')
  redis.call('HSET', r, 'rec', '0', 'ready', NOWS)
  release(r, id, wf)
  redis.call('ZADD', readyq(wf), NOWS, id)
  set_status(r, id, wf, st, 'queued')
  redis.call('HSET', r, 'ua', NOWS)
  WOKE = true
  return {'OK'}
end
`)

// emitScript delivers an event to every run waiting on a topic. KEYS: the
// topic's wait set. ARGV[3]: topic, [4]: marked payload, [5]: operation ID.
// Reply: the IDs.
var emitScript = newScript(`
local function main()
  local prev = once_get(ARGV[5])
  if prev then return prev end
  local ids = redis.call('SMEMBERS', KEYS[1])
  table.sort(ids)
  local out = {}
  for _, id in ipairs(ids) do
    if redis.call('HGET', rkey(id), 'wt') == ARGV[3] then
      deliver(id, ARGV[4])
      out[#out + 1] = id
    else
      redis.call('SREM', KEYS[1], id)
    end
  end
  if #out == 0 then return out end
  return once_put(ARGV[5], out)
end
`)

// sendScript delivers an event to one run. KEYS: run. ARGV[3]: run id,
// [4]: topic, [5]: marked payload, [6]: operation ID.
// Reply: {OK, 1 delivered | 0 buffered}.
var sendScript = newScript(`
local function main()
  local prev = once_get(ARGV[6])
  if prev then return prev end
  local why = send_check(ARGV[3])
  if why then return {why} end
  return once_put(ARGV[6], {'OK', send(ARGV[3], ARGV[4], ARGV[5])})
end
`)

var allScripts = []*redis.Script{
	createScript, listScript, stepsScript, claimScript, checkpointScript, attemptsScript,
	suspendScript, completeScript, terminateScript, pauseScript, resumeScript,
	restartScript, emitScript, sendScript,
}
