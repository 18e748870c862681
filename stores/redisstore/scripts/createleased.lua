-- createleased inserts runs as create.lua does, those given a lease
-- leased at once (an eager start: CreateRuns with NewRun.Lease, see
-- create_leased); a batch with no lease runs create.lua, which carries
-- none of this code.
-- KEYS: the run hashes, one per run.
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3...]: per run the 13 fields
-- new_run reads (lib/runs.lua), then per run created leased its place
-- among them, owner and lease length (µs) (create_runs).
-- Reply: per run {created (1 or 0), HGETALL of the run hash}.
local function main()
  return create_runs(KEYS, 1, #KEYS, ARGV, 2)
end
