package pgstore

import (
	"context"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// Purge deletes up to req.Limit finished runs, oldest end first, with
// their executions, checkpoints, attempts, buffered events, updates,
// streams and search attributes, in one statement and so one short transaction; see the purge
// query in queries.go. Victims are locked with SKIP LOCKED, so a purge
// never waits for a run a claim, a write or another purge holds, and a
// run restarted meanwhile is rechecked and passed over. A write that
// locks a run the purge deleted finds no run: ErrRunNotFound, or a lost
// lease for a fenced write. A dry run counts the same victims and locks
// nothing.
func (s *Store) Purge(ctx context.Context, req storage.PurgeRequest) (storage.PurgeResult, error) {
	const op = "purge"
	if err := s.check(op); err != nil {
		return storage.PurgeResult{}, err
	}
	if err := req.Validate(); err != nil {
		return storage.PurgeResult{}, fmt.Errorf("pgstore: %w", err)
	}
	statuses := make([]string, 0, 3)
	for _, st := range req.PurgeStatuses() {
		statuses = append(statuses, string(st))
	}
	workflows, except := append([]string{}, req.Workflows...), append([]string{}, req.Except...)
	sql := s.q.purge
	if req.DryRun {
		sql = s.q.purgeDry
	}
	var runs, events int64
	err := s.retrying(ctx, func() error {
		return s.pool.QueryRow(ctx, sql, statuses, req.FinishedBefore, workflows, except, req.Limit).Scan(&runs, &events)
	})
	if err != nil {
		return storage.PurgeResult{}, s.wrap(op, err)
	}
	return storage.PurgeResult{Runs: int(runs), Events: int(events)}, nil
}
