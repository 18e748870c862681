#!lua flags=no-writes
-- queuestats counts each queue's runs by state in one consistent read
-- (QueueStats): its status indexes' sizes (the default queue's are all
-- runs' less the other queues', see queue_count), the queued split into
-- the due and the scheduled by the queue's set of queued runs by ReadyAt,
-- whose lowest score at or before now is the oldest ready run's ReadyAt.
-- KEYS[1]: the all-runs index (it routes the script in a cluster; the
-- script builds every key from the prefix).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3...]: the queues.
-- Reply: per queue {ready, scheduled, running, waiting, paused, how long
-- the oldest ready run has been ready (µs, 0 when none is)}.
local function main()
  local out = {}
  for i = 3, #ARGV do
    local qu = ARGV[i]
    local queued = queue_count(qu, 'queued')
    local sched = redis.call('ZCOUNT', queuedq(qu), '(' .. NOWS, '+inf')
    local oldest = 0
    if queued > sched then
      local first = redis.call('ZRANGEBYSCORE', queuedq(qu), '-inf', NOWS, 'WITHSCORES', 'LIMIT', 0, 1)
      if first[2] then oldest = NOW - tonumber(first[2]) end
    end
    out[#out + 1] = {queued - sched, sched, queue_count(qu, 'running'),
      queue_count(qu, 'waiting'), queue_count(qu, 'paused'), oldest}
  end
  return out
end
