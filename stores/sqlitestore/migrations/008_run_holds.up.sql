-- Holds (RunRecord.Hold): why an engine handed a run back instead of
-- executing it, its code no longer making the calls its history recorded.

-- The run's hold as a JSON object (storage.Hold encoded by encoding/json),
-- NULL when it is not held, as every run stored before is. It lives in
-- runs, not run_data, because the claim clears it: the claim's one UPDATE
-- of the run assigns it NULL with the rest, where a column of run_data
-- would cost every claim a second write. A run not held pays a NULL in its
-- row, and only the Suspend that holds a run writes anything more.
ALTER TABLE runs ADD COLUMN hold TEXT;
