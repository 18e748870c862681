package redisstore

import (
	"context"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// ListExecutions implements storage.Store. The ended executions come from
// the run's executions list (x:<id>), which Restart and ContinueAsNew
// append to; the current one is described by the run hash itself, so
// creating, completing and terminating a run write its execution in the
// fields they already write.
func (s *Store) ListExecutions(ctx context.Context, runID string) ([]storage.ExecutionRecord, error) {
	v, err := s.run(ctx, executionsScript, []string{s.keys.run(runID), s.keys.executions(runID)})
	if err != nil {
		return nil, fmt.Errorf("redisstore: list executions of %q: %w", runID, err)
	}
	list, err := status("list executions of", runID, v)
	if err != nil {
		return nil, err
	}
	if len(list) != 3 {
		return nil, fmt.Errorf("redisstore: list executions of %q: unexpected reply", runID)
	}
	past, _ := list[1].([]any)
	cur, ok := list[2].([]any)
	if !ok || len(cur) != 8 {
		return nil, fmt.Errorf("redisstore: list executions of %q: unexpected reply", runID)
	}
	out := make([]storage.ExecutionRecord, 0, len(past)+1)
	for _, x := range past {
		e, err := decodeExecution(str(x))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	// ex, sa, ca, ea, st, err, xf, xk; sa is missing on runs created
	// before executions were recorded, whose first execution began at ca.
	started := str(cur[1])
	if started == "" {
		started = str(cur[2])
	}
	e, err := currentExecution(str(cur[0]), started, str(cur[3]), str(cur[4]), str(cur[6]), str(cur[5]), str(cur[7]))
	if err != nil {
		return nil, err
	}
	return append(out, e), nil
}

// ContinueAsNew implements storage.Store. One script, fenced by the lease,
// ends the current execution as Restart does (its checkpoints and attempts
// renamed to the ended execution's keys, so the new execution's replay
// reads nothing of earlier ones) and begins the next with the new input. A
// lost lease says why, as Heartbeat's does. A script the client sends
// again finds the lease released and reports it lost, as a repeated
// Complete does. With ChildError the script applies the parent policy of
// the run's descendants in the same call, as Complete's does.
func (s *Store) ContinueAsNew(ctx context.Context, req storage.ContinueRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	childJSON, err := encodeError(req.ChildError)
	if err != nil {
		return err
	}
	id := req.Lease.RunID
	keys := []string{s.keys.run(id), s.keys.checkpoints(id), s.keys.attempts(id), s.keys.executions(id)}
	v, err := s.run(ctx, continueScript, keys, req.Lease.Token, id, mark(req.Input), mark(req.Progress),
		childJSON, markText(req.ChildCancel))
	if err != nil {
		return fmt.Errorf("redisstore: continue as new %q: %w", id, err)
	}
	_, err = judged("continue as new", req.Lease, v)
	return err
}
