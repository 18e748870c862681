package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/stemflow/stem/storage"
)

// rideScript writes a checkpoint that carries the run's completion;
// checkpointScript, which carries none of the completion's code, writes
// the others.
var rideScript = newScript("ride")

func init() { allScripts = append(allScripts, rideScript) }

// LoadReplay implements storage.Store. It reads the current execution's
// attempts only when some may lack their checkpoint (the run hash's pend
// flag), so replaying a run whose steps all succeeded at once costs what
// reading its checkpoints does.
func (s *Store) LoadReplay(ctx context.Context, runID string) (storage.Replay, error) {
	n, cps, atts, err := s.readSteps(ctx, "load replay of", runID, 0, false)
	if err != nil {
		return storage.Replay{}, err
	}
	rp := storage.Replay{Execution: n, Checkpoints: cps}
	if len(atts) > 0 {
		rp.Pending = pending(cps, atts)
	}
	return rp, nil
}

// Checkpoint implements storage.Store. A request with a Complete runs
// ride.lua instead of checkpoint.lua: the same checkpoint write, followed
// in the same script by the completion when the checkpoint was written
// and no pause took effect, so the run's last step and its end cost one
// call. A request with a Reply, Streams or Attributes runs interact.lua,
// which writes them with the checkpoint (and the completion, when there
// is one; see interact.go), the attributes merged into the run's and
// their indexes kept (see attrs.go). A plain checkpoint's script carries
// none of the completion's code, nor of the reply's, streams' and
// attributes'. A checkpoint's input is part of its stored result
// (encodeResult), which the scripts store as given.
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
	// An attempt of another key stays pending until that key's checkpoint.
	loose := ""
	if slices.ContainsFunc(req.Attempts, func(a storage.Attempt) bool { return a.Key != cp.Key }) {
		loose = "1"
	}
	id := req.Lease.RunID
	busy := ""
	if req.Busy {
		busy = "1"
	}
	sc, size := checkpointScript, 10+len(atts)
	done := req.Completion()
	interact := req.Reply != nil || len(req.Streams) > 0 || len(req.Attributes) > 0
	switch {
	case interact:
		sc, size = interactScript, size+1+completionFields+interactFields(req.Streams)+2
	case done != nil:
		sc, size = rideScript, size+completionFields
	}
	args := make([]any, 0, size)
	args = append(args, req.Lease.Token, durMicros(req.LeaseFor), id, cp.Key, string(cp.Kind), errJSON, encodeResult(cp.Input, cp.Output), loose, mark(req.Progress), busy)
	if interact {
		ending := ""
		if done != nil {
			ending = "1"
		}
		args = append(args, ending)
	}
	if done != nil {
		if args, err = appendCompletion(args, *done); err != nil {
			return res, err
		}
	}
	keys := []string{s.keys.run(id), s.keys.checkpoints(id), s.keys.attempts(id)}
	if interact {
		if args, err = interactArgs(args, req.Reply, req.Streams); err != nil {
			return res, err
		}
		args = append(args, encodeAttrs(req.Attributes), storage.MaxAttributes)
		keys = append(keys, s.keys.updates(id), s.keys.replies(id), s.keys.streams(id))
	}
	args = append(args, atts...)
	v, err := s.run(ctx, sc, keys, args...)
	if err != nil {
		return res, fmt.Errorf("redisstore: checkpoint %q: %w", id, err)
	}
	if interact {
		if err := badReply(id, v); err != nil {
			return res, err
		}
		if err := badAttrs(id, v); err != nil {
			return res, err
		}
	}
	list, err := status("checkpoint", id, v)
	if err != nil {
		return res, err
	}
	if len(list) < 2 {
		return res, fmt.Errorf("redisstore: checkpoint %q: unexpected reply", id)
	}
	res.CancelRequested = str(list[1]) == "1"
	switch list[0] {
	case "PAUSED":
		res.Paused = true
	case "PAUSEREQ":
		res.PauseRequested = true
	case "DONE":
		res.Completed = true
	case "EXISTS":
		if len(list) != 3 {
			return res, fmt.Errorf("redisstore: checkpoint %q: unexpected reply", id)
		}
		old, err := decodeCheckpoint(cp.Key, str(list[2]))
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
	return s.extend(ctx, "record attempts", req.Lease, req.LeaseFor, "a", "", atts)
}

// ListSteps implements storage.Store.
func (s *Store) ListSteps(ctx context.Context, q storage.StepsQuery) (storage.History, error) {
	if err := q.Validate(); err != nil {
		return storage.History{}, fmt.Errorf("redisstore: %w", err)
	}
	n, cps, atts, err := s.readSteps(ctx, "list steps of", q.RunID, q.Execution, true)
	if err != nil {
		return storage.History{}, err
	}
	h := storage.History{Execution: n}
	byKey := make(map[string][]storage.Attempt)
	for _, a := range atts {
		byKey[a.Key] = append(byKey[a.Key], a)
	}
	if len(cps) > 0 {
		h.Steps = make([]storage.StepRecord, len(cps))
		for i, cp := range cps {
			h.Steps[i] = storage.StepRecord{Checkpoint: cp, Attempts: byKey[cp.Key]}
		}
	}
	h.Pending = pending(cps, atts)
	return h, nil
}

// pending returns the attempts of keys without a checkpoint, in order.
func pending(cps []storage.Checkpoint, atts []storage.Attempt) []storage.Attempt {
	have := make(map[string]bool, len(cps))
	for _, cp := range cps {
		have[cp.Key] = true
	}
	var out []storage.Attempt
	for _, a := range atts {
		if !have[a.Key] {
			out = append(out, a)
		}
	}
	return out
}

// readSteps reads execution n of a run (0: the current one): its number,
// its checkpoints (sorted by sequence) and its attempts (always when
// allAttempts, else only when some may be pending), in one script so they
// are consistent with each other.
func (s *Store) readSteps(ctx context.Context, op, runID string, n int, allAttempts bool) (int, []storage.Checkpoint, []storage.Attempt, error) {
	flag := ""
	if allAttempts {
		flag = "1"
	}
	keys := []string{s.keys.run(runID), s.keys.checkpoints(runID), s.keys.attempts(runID)}
	v, err := s.run(ctx, stepsScript, keys, runID, n, flag)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("redisstore: %s %q: %w", op, runID, err)
	}
	if list, ok := v.([]any); ok && len(list) == 2 && list[0] == "BADARG" {
		return 0, nil, nil, fmt.Errorf("redisstore: %s %q: execution %d: the run has %s: %w", op, runID, n, str(list[1]), storage.ErrInvalidArgument)
	}
	list, err := status(op, runID, v)
	if err != nil {
		return 0, nil, nil, err
	}
	if len(list) != 4 {
		return 0, nil, nil, fmt.Errorf("redisstore: %s %q: unexpected reply", op, runID)
	}
	num, ok := list[1].(int64)
	if !ok {
		return 0, nil, nil, fmt.Errorf("redisstore: %s %q: unexpected reply", op, runID)
	}
	ex := int(num)
	m, err := pairsToMap(list[2])
	if err != nil {
		return 0, nil, nil, err
	}
	var cps []storage.Checkpoint
	for k, v := range m {
		cp, err := decodeCheckpoint(k, v)
		if err != nil {
			return 0, nil, nil, err
		}
		cps = append(cps, cp)
	}
	slices.SortFunc(cps, func(a, b storage.Checkpoint) int { return cmp.Compare(a.Seq, b.Seq) })
	raw, _ := list[3].([]any)
	var atts []storage.Attempt
	for _, x := range raw {
		a, err := decodeAttempt(str(x), ex)
		if err != nil {
			return 0, nil, nil, err
		}
		atts = append(atts, a)
	}
	return ex, cps, atts, nil
}
