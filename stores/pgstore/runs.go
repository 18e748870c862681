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
	// Creations ride with the checkpoint writers' next batch, with every
	// other creation queued by then: callers starting runs one at a time
	// share commits.
	call := &ckptCall{create: &createCall{runs: runs}, done: make(chan struct{})}
	if _, err := s.submit(ctx, call); err != nil {
		return nil, err
	}
	out := call.create.out
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
	if q.Queue != "" {
		add("queue = $%d", q.Queue)
	}
	if len(q.Versions) > 0 {
		vs := make([]int32, len(q.Versions))
		for i, v := range q.Versions {
			vs[i] = int32(v)
		}
		add("version = ANY($%d::int[])", vs)
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
