package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// runCols are the columns scanRun reads, from runFrom.
const runCols = `r.id, r.workflow, r.parent_id, r.status, d.input, d.output, d.error_message, d.error_code,
	r.pause_requested, r.ready_at, r.wait_key, r.wait_topic, r.wait_kind, r.wait_deadline,
	r.owner, r.lease_until, r.token, r.recoveries, r.created_at, r.updated_at`

const runFrom = `runs r JOIN run_data d ON d.ref = r.ref`

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
// q.Limit (default 100) of them, after the cursor q.After.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	// One statement per filter combination, so each uses its index.
	where := `r.id > ?1`
	switch {
	case q.Workflow != "" && q.Status != "":
		where += ` AND r.workflow = ?3 AND r.status = ?4`
	case q.Workflow != "":
		where += ` AND r.workflow = ?3`
	case q.Status != "":
		where += ` AND r.status = ?4`
	}
	query := `SELECT ` + runCols + ` FROM ` + runFrom + ` WHERE ` + where + ` ORDER BY r.id LIMIT ?2`
	var page storage.RunPage
	err := s.read(ctx, "list runs", false, func(c *conn) error {
		page = storage.RunPage{}
		return c.query(query, func(r row) error {
			page.Runs = append(page.Runs, scanRun(r))
			return nil
		}, q.After, limit+1, q.Workflow, string(q.Status))
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

const checkpointCols = `key, kind, output, error_message, error_code, seq, created_at`

func scanCheckpoint(r row) storage.Checkpoint {
	return storage.Checkpoint{
		Key:       r.str(0),
		Kind:      storage.CheckpointKind(r.str(1)),
		Output:    r.bytes(2),
		Error:     r.errorInfo(3),
		Seq:       r.int64(5),
		CreatedAt: r.time(6),
	}
}

func runExists(c *conn, id string) (bool, error) {
	return c.queryRow(`SELECT 1 FROM runs WHERE id = ?1`, func(row) {}, id)
}

// LoadCheckpoints returns every checkpoint of a run in sequence order, or
// storage.ErrRunNotFound.
func (s *Store) LoadCheckpoints(ctx context.Context, runID string) ([]storage.Checkpoint, error) {
	var cps []storage.Checkpoint
	err := s.read(ctx, "load checkpoints", false, func(c *conn) error {
		cps = nil
		if err := c.query(`SELECT `+checkpointCols+` FROM checkpoints WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1) ORDER BY seq`, func(r row) error {
			cps = append(cps, scanCheckpoint(r))
			return nil
		}, runID); err != nil {
			return err
		}
		if len(cps) == 0 {
			ok, err := runExists(c, runID)
			if err == nil && !ok {
				err = storage.ErrRunNotFound
			}
			return err
		}
		return nil
	})
	return cps, err
}

// ListSteps returns a run's checkpoints in sequence order, each with its
// attempts in the order recorded, or storage.ErrRunNotFound.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]storage.StepRecord, error) {
	var steps []storage.StepRecord
	err := s.read(ctx, "list steps", true, func(c *conn) error {
		steps = nil
		index := map[string]int{}
		// Attempts in the order recorded: those recorded on their own
		// before the step's checkpoint, those written with checkpoints,
		// those recorded on their own after it.
		var before, with, after []storage.Attempt
		if err := c.query(`SELECT `+checkpointCols+`, attempts FROM checkpoints WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1) ORDER BY seq`, func(r row) error {
			cp := scanCheckpoint(r)
			index[cp.Key] = len(steps)
			steps = append(steps, storage.StepRecord{Checkpoint: cp})
			as, err := decodeAttempts(r.bytes(7))
			if err != nil {
				return fmt.Errorf("checkpoint %q of run %q: %w", cp.Key, runID, err)
			}
			with = append(with, as...)
			return nil
		}, runID); err != nil {
			return err
		}
		if len(steps) == 0 {
			ok, err := runExists(c, runID)
			if err == nil && !ok {
				err = storage.ErrRunNotFound
			}
			return err
		}
		if err := c.query(`SELECT key, number, started_at, ended_at, error, after_checkpoint FROM attempts WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1) ORDER BY id`, func(r row) error {
			a := storage.Attempt{
				Key:     r.str(0),
				Number:  int(r.int64(1)),
				Started: r.time(2),
				Ended:   r.time(3),
				Error:   r.str(4),
			}
			if r.int64(5) != 0 {
				after = append(after, a)
			} else {
				before = append(before, a)
			}
			return nil
		}, runID); err != nil {
			return err
		}
		for _, list := range [][]storage.Attempt{before, with, after} {
			for _, a := range list {
				if i, ok := index[a.Key]; ok { // else: a step with no checkpoint yet
					steps[i].Attempts = append(steps[i].Attempts, a)
				}
			}
		}
		return nil
	})
	return steps, err
}

// leaseUntil is now+leaseFor in the stored form.
func leaseUntil(now time.Time, leaseFor time.Duration) int64 {
	return now.Add(leaseFor).UnixNano()
}
