-- checkpoint writes a step's checkpoint under the lease (Checkpoint),
-- publishing the run's progress when given, also when the checkpoint
-- existed (see write_step in lib/holder.lua).
-- KEYS[1]: the run hash, KEYS[2]: its checkpoints, KEYS[3]: its attempts
-- (the current execution's).
-- ARGV[1]: prefix, ARGV[2]: clock; ARGV[3]: token, ARGV[4]: lease length
-- (µs), ARGV[5]: run id, ARGV[6]: checkpoint key, ARGV[7]: kind, ARGV[8]:
-- error JSON, ARGV[9]: the result (the marked output, or the marked input
-- and output: encodeResult in codec.go), ARGV[10]: "1" when an attempt is of
-- another key than the checkpoint's, ARGV[11]: marked progress ("" leaves
-- the run's as it is), ARGV[12]: "1" when the worker is busy with other
-- steps (a requested pause then waits), ARGV[13...]: encoded attempts.
-- Reply: {OK, cr} | {PAUSED, cr} | {PAUSEREQ, cr} | {EXISTS, cr,
-- encoding of the stored checkpoint} | {LEASELOST}, cr "1" when the
-- run's cancellation is requested, else "".
local function main()
  return (write_step(13))
end
