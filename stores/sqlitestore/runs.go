package sqlitestore

import (
	"context"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// CreateRuns inserts runs; an ID that exists is left untouched and reported
// with Created false and its stored record. All requests are one atomic
// change.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	if err := storage.ValidateNewRuns(runs); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	var out []storage.CreateResult
	err := s.write(ctx, "create runs", func(w *wtx) error {
		out = make([]storage.CreateResult, 0, len(runs))
		now := s.now()
		n := now.UnixNano()
		for _, r := range runs {
			var ref int64
			ready := n
			if r.StartAt != nil && r.StartAt.After(now) {
				ready = r.StartAt.UnixNano()
			}
			created, err := w.queryRow(`INSERT INTO runs (id, workflow, parent_id, parent_policy, status, ready_at, created_at, updated_at)
				VALUES (?1, ?2, ?3, ?4, 'queued', ?6, ?5, ?5) ON CONFLICT (id) DO NOTHING RETURNING ref`,
				func(r row) { ref = r.int64(0) }, r.ID, r.Workflow, r.ParentID, string(r.ParentPolicy), n, ready)
			if err != nil {
				return err
			}
			if created {
				if _, err := w.exec(`INSERT INTO run_data (ref, input) VALUES (?1, ?2)`, ref, bytesArg(r.Input)); err != nil {
					return err
				}
				if _, err := w.exec(`INSERT INTO executions (run_ref, number, started_at) VALUES (?1, 1, ?2)`, ref, n); err != nil {
					return err
				}
				w.wake = true // a delayed run too: engines learn of its wake time
			}
			rec, _, err := getRun(w.conn, r.ID)
			if err != nil {
				return err
			}
			out = append(out, storage.CreateResult{Created: created, Run: rec})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetRun returns a run's record, or storage.ErrRunNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	var rec storage.RunRecord
	err := s.read(ctx, "get run", false, func(c *conn) error {
		var found bool
		var err error
		rec, found, err = getRun(c, id)
		if err == nil && !found {
			err = storage.ErrRunNotFound
		}
		return err
	})
	return rec, err
}

// ListRuns returns runs ordered by ID, filtered by the query, at most
// q.PageSize() of them, after the cursor q.After.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	if err := q.Validate(); err != nil {
		return storage.RunPage{}, fmt.Errorf("sqlitestore: %w", err)
	}
	limit := q.PageSize()
	// One statement per filter combination, so each uses its index.
	where := `r.id > ?1`
	if q.Workflow != "" {
		where += ` AND r.workflow = ?3`
	}
	if q.Status != "" {
		where += ` AND r.status = ?4`
	}
	if q.ParentID != "" {
		where += ` AND r.parent_id = ?5`
	}
	query := `SELECT ` + runCols + ` FROM ` + runFrom + ` WHERE ` + where + ` ORDER BY r.id LIMIT ?2`
	var page storage.RunPage
	err := s.read(ctx, "list runs", false, func(c *conn) error {
		page = storage.RunPage{}
		return c.query(query, func(r row) error {
			page.Runs = append(page.Runs, scanRun(r))
			return nil
		}, q.After, limit+1, q.Workflow, string(q.Status), q.ParentID)
	})
	if err != nil {
		return storage.RunPage{}, err
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.Next = page.Runs[limit-1].ID
	}
	return page, nil
}

// runCols are the columns scanRun reads, from runFrom.
const runCols = `r.id, r.workflow, r.parent_id, r.status, d.input, d.output, d.error_message, d.error_code,
	r.pause_requested, r.ready_at, r.wait_key, r.wait_topic, r.wait_kind, r.wait_deadline,
	r.owner, r.lease_until, r.token, r.recoveries, r.created_at, r.updated_at,
	r.parent_policy, r.execution, e.started_at, e.ended_at, r.active_key, r.active_attempt, r.active_started`

// runFrom joins a run's state, its data and its current execution.
const runFrom = `runs r JOIN run_data d ON d.ref = r.ref JOIN executions e ON e.run_ref = r.ref AND e.number = r.execution`

func scanRun(r row) storage.RunRecord {
	rec := storage.RunRecord{
		ID:             r.str(0),
		Workflow:       r.str(1),
		ParentID:       r.str(2),
		Status:         storage.RunStatus(r.str(3)),
		Input:          r.bytes(4),
		Output:         r.bytes(5),
		Error:          r.errorInfo(6),
		PauseRequested: r.int64(8) != 0,
		ReadyAt:        r.timePtr(9),
		Wait:           scanWait(r, 10),
		Owner:          r.str(14),
		LeaseUntil:     r.time(15),
		Token:          r.int64(16),
		Recoveries:     int(r.int64(17)),
		CreatedAt:      r.time(18),
		UpdatedAt:      r.time(19),
		ParentPolicy:   storage.ParentPolicy(r.str(20)),
		Execution:      int(r.int64(21)),
		StartedAt:      r.time(22),
		EndedAt:        r.timePtr(23),
	}
	if !r.isNull(24) {
		rec.Active = &storage.ActiveStep{Key: r.str(24), Attempt: int(r.int64(25)), Started: r.time(26)}
	}
	return rec
}

// scanWait reads wait_key, wait_topic, wait_kind, wait_deadline from i on.
func scanWait(r row, i int) *storage.Wait {
	if r.isNull(i) {
		return nil
	}
	return &storage.Wait{
		Key:      r.str(i),
		Topic:    r.str(i + 1),
		Kind:     storage.CheckpointKind(r.str(i + 2)),
		Deadline: r.timePtr(i + 3),
	}
}

func getRun(c *conn, id string) (storage.RunRecord, bool, error) {
	var rec storage.RunRecord
	found, err := c.queryRow(`SELECT `+runCols+` FROM `+runFrom+` WHERE r.id = ?1`, func(r row) { rec = scanRun(r) }, id)
	return rec, found, err
}
