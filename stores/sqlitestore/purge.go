package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// Purge deletes up to req.Limit finished runs that match it, oldest end
// first, each with its executions, checkpoints, attempts, buffered events,
// wait topics, start keys, updates, streams and search attributes (see
// deleteRuns), in one
// write request of the writer: the batch holding it is as long as
// deleting those runs, and claims queued meanwhile go in the next. The
// victims come from runs_ended, an index of the finished runs alone by
// their end, so finding them never reads an unfinished run. A dry run
// counts them on a read connection and takes no lock.
func (s *Store) Purge(ctx context.Context, req storage.PurgeRequest) (storage.PurgeResult, error) {
	if err := req.Validate(); err != nil {
		return storage.PurgeResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	args := purgeArgs(req)
	var res storage.PurgeResult
	if req.DryRun {
		err := s.read(ctx, "purge", true, func(c *conn) error {
			refs, err := purgeVictims(c, args)
			if err != nil {
				return err
			}
			res = storage.PurgeResult{Runs: len(refs)}
			if len(refs) == 0 {
				return nil
			}
			_, err = c.queryRow(`SELECT count(*) FROM events WHERE run_ref IN (SELECT value FROM json_each(?1))`,
				func(r row) { res.Events = int(r.int64(0)) }, refList(refs))
			return err
		})
		if err != nil {
			return storage.PurgeResult{}, err
		}
		return res, nil
	}
	err := s.write(ctx, "purge", func(w *wtx) error {
		res = storage.PurgeResult{}
		refs, err := purgeVictims(w.conn, args)
		if err != nil || len(refs) == 0 {
			return err
		}
		res.Runs, res.Events, err = w.deleteRuns(refList(refs))
		return err
	})
	if err != nil {
		return storage.PurgeResult{}, err
	}
	return res, nil
}

// deleteRuns deletes the runs whose refs list (a JSON list) holds, each with
// everything it owns: executions, checkpoints, attempts, buffered events,
// wait topics, data, the start keys it holds, its updates, its streams
// (their values too) and its search attributes. It returns how many runs and buffered events it
// deleted. Purge deletes its victims with it, and a create that replaces
// a run deletes that run's family.
func (w *wtx) deleteRuns(list string) (runs, events int, err error) {
	// A run's rows first, the run last: every table that refers to runs is
	// indexed by run, so the foreign key checks are seeks.
	for _, table := range []string{"checkpoints", "attempts", "events", "wait_topics", "executions", "start_keys", "updates", "streams", "stream_values", "run_attrs"} {
		n, err := w.exec(`DELETE FROM `+table+` WHERE run_ref IN (SELECT value FROM json_each(?1))`, list)
		if err != nil {
			return 0, 0, err
		}
		if table == "events" {
			events = int(n)
		}
	}
	if _, err := w.exec(`DELETE FROM run_data WHERE ref IN (SELECT value FROM json_each(?1))`, list); err != nil {
		return 0, 0, err
	}
	n, err := w.exec(`DELETE FROM runs WHERE ref IN (SELECT value FROM json_each(?1))`, list)
	return int(n), events, err
}

// purgeQuery selects the refs of the finished runs a purge deletes: ended
// before ?1, of the statuses ?2, of the workflows ?3 (a JSON list; [] for
// every one) and not of ?4, oldest end first, at most ?5.
const purgeQuery = `SELECT ref FROM runs INDEXED BY runs_ended
	WHERE ended_at < ?1 AND status IN (SELECT value FROM json_each(?2))
		AND (?3 = '[]' OR workflow IN (SELECT value FROM json_each(?3)))
		AND workflow NOT IN (SELECT value FROM json_each(?4))
	ORDER BY ended_at LIMIT ?5`

func purgeArgs(req storage.PurgeRequest) []any {
	list := func(v any) string {
		b, _ := json.Marshal(v) // strings only: cannot fail
		return string(b)
	}
	wfs, except := req.Workflows, req.Except
	if wfs == nil {
		wfs = []string{}
	}
	if except == nil {
		except = []string{}
	}
	return []any{req.FinishedBefore.UnixNano(), list(req.PurgeStatuses()), list(wfs), list(except), req.Limit}
}

func purgeVictims(c *conn, args []any) ([]int64, error) {
	var refs []int64
	err := c.query(purgeQuery, func(r row) error {
		refs = append(refs, r.int64(0))
		return nil
	}, args...)
	return refs, err
}

// refList is refs as a JSON list, for json_each.
func refList(refs []int64) string {
	b, _ := json.Marshal(refs) // integers only: cannot fail
	return string(b)
}
