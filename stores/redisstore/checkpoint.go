package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/stemflow/stem/storage"
)

// LoadCheckpoints implements storage.Store.
func (s *Store) LoadCheckpoints(ctx context.Context, runID string) ([]storage.Checkpoint, error) {
	cps, _, err := s.readSteps(ctx, runID, false)
	return cps, err
}

// Checkpoint implements storage.Store.
func (s *Store) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	var res storage.CheckpointResult
	if err := req.Validate(); err != nil {
		return res, fmt.Errorf("redisstore: %w", err)
	}
	cp := req.Checkpoint
	errJSON, err := encodeError(cp.Error)
	if err != nil {
		return res, err
	}
	atts, err := encodeAttempts(req.Attempts)
	if err != nil {
		return res, err
	}
	id := req.Lease.RunID
	args := make([]any, 0, 7+len(atts))
	args = append(args, req.Lease.Token, durMicros(req.LeaseFor), id, cp.Key, string(cp.Kind), errJSON, mark(cp.Output))
	args = append(args, atts...)
	v, err := s.run(ctx, checkpointScript, []string{s.keys.run(id), s.keys.checkpoints(id), s.keys.attempts(id)}, args...)
	if err != nil {
		return res, fmt.Errorf("redisstore: checkpoint %q: %w", id, err)
	}
	list, err := status("checkpoint", id, v)
	if err != nil {
		return res, err
	}
	switch list[0] {
	case "PAUSED":
		res.Paused = true
	case "EXISTS":
		old, err := decodeCheckpoint(cp.Key, str(list[1]))
		if err != nil {
			return res, err
		}
		res.Existing = &old
	}
	return res, nil
}

// RecordAttempts implements storage.Store.
func (s *Store) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	atts, err := encodeAttempts(req.Attempts)
	if err != nil {
		return err
	}
	return s.extend(ctx, "record attempts", req.Lease, req.LeaseFor, atts)
}

// ListSteps implements storage.Store.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]storage.StepRecord, error) {
	cps, atts, err := s.readSteps(ctx, runID, true)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string][]storage.Attempt)
	for _, a := range atts {
		byKey[a.Key] = append(byKey[a.Key], a)
	}
	if len(cps) == 0 {
		return nil, nil
	}
	out := make([]storage.StepRecord, len(cps))
	for i, cp := range cps {
		out[i] = storage.StepRecord{Checkpoint: cp, Attempts: byKey[cp.Key]}
	}
	return out, nil
}

// readSteps reads a run's checkpoints (sorted by sequence) and, if asked,
// its attempts, in one script so they are consistent with each other.
func (s *Store) readSteps(ctx context.Context, runID string, attempts bool) ([]storage.Checkpoint, []storage.Attempt, error) {
	flag := ""
	if attempts {
		flag = "1"
	}
	keys := []string{s.keys.run(runID), s.keys.checkpoints(runID), s.keys.attempts(runID)}
	v, err := s.run(ctx, stepsScript, keys, flag)
	if err != nil {
		return nil, nil, fmt.Errorf("redisstore: reading steps of %q: %w", runID, err)
	}
	list, err := status("read steps of", runID, v)
	if err != nil {
		return nil, nil, err
	}
	if len(list) != 3 {
		return nil, nil, fmt.Errorf("redisstore: reading steps of %q: unexpected reply", runID)
	}
	m, err := pairsToMap(list[1])
	if err != nil {
		return nil, nil, err
	}
	var cps []storage.Checkpoint
	for k, v := range m {
		cp, err := decodeCheckpoint(k, v)
		if err != nil {
			return nil, nil, err
		}
		cps = append(cps, cp)
	}
	slices.SortFunc(cps, func(a, b storage.Checkpoint) int { return cmp.Compare(a.Seq, b.Seq) })
	raw, _ := list[2].([]any)
	var atts []storage.Attempt
	for _, x := range raw {
		a, err := decodeAttempt(str(x))
		if err != nil {
			return nil, nil, err
		}
		atts = append(atts, a)
	}
	return cps, atts, nil
}
