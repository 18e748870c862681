-- create inserts runs (CreateRuns), each in its execution 1, started now,
-- and a child in its parent's children index.
-- KEYS: the run hashes, one per run.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3...]: per run the 13 fields
-- create_run reads (lib/runs.lua).
-- Reply: per run {created (1 or 0), HGETALL of the run hash}.
local function main()
  local out = {}
  for i = 1, #KEYS do
    out[i] = create_run(KEYS[i], ARGV, 2 + (i - 1) * 13)
  end
  return out
end
