package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// CreateRuns inserts the runs with one INSERT ... ON CONFLICT DO NOTHING,
// which also records each new run's first execution, and reads back every
// requested ID, both in one implicit transaction (one round trip). Runs that
// already existed are reported with Created false.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	const op = "create runs"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := storage.ValidateNewRuns(runs); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if len(runs) == 0 {
		return []storage.CreateResult{}, nil
	}
	ids := make([]string, len(runs))
	workflows := make([]string, len(runs))
	parents := make([]string, len(runs))
	inputs := make([][]byte, len(runs))
	policies := make([]string, len(runs))
	for i, r := range runs {
		ids[i], workflows[i], parents[i], inputs[i], policies[i] = r.ID, r.Workflow, r.ParentID, r.Input, string(r.ParentPolicy)
	}
	args := []any{s.clock(), ids, workflows, parents, inputs, policies}
	if s.notify {
		args = append(args, s.channel)
	}
	created := make(map[string]bool, len(runs))
	records := make(map[string]storage.RunRecord, len(runs))
	err := s.retrying(ctx, func() error {
		clear(created)
		clear(records)
		b := &pgx.Batch{}
		b.Queue(s.q.createRuns, args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				created[id] = true
			}
			return rows.Err()
		})
		b.Queue(s.q.selectRuns, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				rec, err := scanRun(rows)
				if err != nil {
					return err
				}
				records[rec.ID] = rec
			}
			return rows.Err()
		})
		return s.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	out := make([]storage.CreateResult, len(runs))
	for i, id := range ids {
		rec, ok := records[id]
		if !ok {
			return nil, s.wrap(op, fmt.Errorf("run %q vanished after insert", id))
		}
		out[i] = storage.CreateResult{Created: created[id], Run: rec}
		delete(created, id) // a repeated ID in one request is created once
	}
	for _, r := range out {
		if r.Created {
			s.poke()
			break
		}
	}
	return out, nil
}

// GetRun returns a run's record, or ErrRunNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	const op = "get run"
	if err := s.check(op); err != nil {
		return storage.RunRecord{}, err
	}
	rec, err := scanRun(s.pool.QueryRow(ctx, s.q.getRun, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.RunRecord{}, fmt.Errorf("pgstore: %s %q: %w", op, id, storage.ErrRunNotFound)
	}
	if err != nil {
		return storage.RunRecord{}, s.wrap(op, err)
	}
	return rec, nil
}

// ListRuns returns a page of runs in ID order. The statement names only the
// filters the query sets, so each shape keeps an index-friendly plan.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	const op = "list runs"
	if err := s.check(op); err != nil {
		return storage.RunPage{}, err
	}
	if err := q.Validate(); err != nil {
		return storage.RunPage{}, fmt.Errorf("pgstore: %w", err)
	}
	limit := q.PageSize()
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if q.Workflow != "" {
		add("workflow = $%d", q.Workflow)
	}
	if q.Status != "" {
		add("status = $%d", string(q.Status))
	}
	if q.ParentID != "" {
		// The second condition lets the planner use the partial index of
		// children.
		add("parent_id = $%d AND parent_id <> ''", q.ParentID)
	}
	if q.After != "" {
		add("id > $%d", q.After)
	}
	sql := `SELECT ` + cols("") + ` FROM ` + s.schema + `.runs`
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit+1)
	sql += fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return storage.RunPage{}, s.wrap(op, err)
	}
	var page storage.RunPage
	for rows.Next() {
		rec, err := scanRun(rows)
		if err != nil {
			rows.Close()
			return storage.RunPage{}, s.wrap(op, err)
		}
		page.Runs = append(page.Runs, rec)
	}
	if err := rows.Err(); err != nil {
		return storage.RunPage{}, s.wrap(op, err)
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.Next = page.Runs[limit-1].ID
	}
	return page, nil
}
