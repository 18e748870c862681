package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// Pause implements storage.Store.
func (s *Store) Pause(ctx context.Context, runID string) error {
	return s.control(ctx, "pause", pauseScript, runID, s.keys.run(runID))
}

// Resume implements storage.Store.
func (s *Store) Resume(ctx context.Context, runID string) error {
	return s.control(ctx, "resume", resumeScript, runID, s.keys.run(runID))
}

// Terminate implements storage.Store. A Notify is handled as in Complete.
// With ChildError the script walks the children indexes (ch:<id>) from the
// run and terminates the descendants in the same script, requesting with
// ChildCancel the cancellation of those cancelled with their parent.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	errJSON, err := encodeError(&req.Error)
	if err != nil {
		return nil, err
	}
	childJSON, err := encodeError(req.ChildError)
	if err != nil {
		return nil, err
	}
	id := req.RunID
	args := append([]any{id, errJSON}, notifyArgs(req.Notify)...)
	args = append(args, childJSON, markText(req.ChildCancel))
	v, err := s.run(ctx, terminateScript, []string{s.keys.run(id)}, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: terminate %q: %w", id, err)
	}
	list, err := status("terminate", id, v)
	if err != nil {
		return nil, err
	}
	raw, ok := list[len(list)-1].([]any)
	if len(list) != 3 || !ok {
		return nil, fmt.Errorf("redisstore: terminate %q: unexpected reply", id)
	}
	ids := make([]string, len(raw))
	for i, x := range raw {
		ids[i] = str(x)
	}
	return ids, nil
}

// Cancel implements storage.Store. The request is the run hash's cq
// field, its reason marked (markText), so that a request without a reason
// is told from none; the first request's field stays.
func (s *Store) Cancel(ctx context.Context, req storage.CancelRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	id := req.RunID
	v, err := s.run(ctx, cancelScript, []string{s.keys.run(id)}, id, markText(req.Reason))
	if err != nil {
		return fmt.Errorf("redisstore: cancel %q: %w", id, err)
	}
	_, err = status("cancel", id, v)
	return err
}

// Restart implements storage.Store. The call carries a random operation
// ID, as SendEvent does, so that a script the client sends again returns
// its first reply instead of beginning yet another execution. With
// IfExecution the script compares the run's execution before anything
// else, so a conflict writes nothing (and is not recorded as the
// operation's reply: nothing happened to repeat).
func (s *Store) Restart(ctx context.Context, req storage.RestartRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	id := req.RunID
	keys := []string{s.keys.run(id), s.keys.checkpoints(id), s.keys.attempts(id), s.keys.executions(id)}
	v, err := s.run(ctx, restartScript, keys, id, req.FromKey, rand.Text(), storage.UpdateTopicPrefix, nonZero(req.IfExecution))
	if err != nil {
		return fmt.Errorf("redisstore: restart %q: %w", id, err)
	}
	if list, ok := v.([]any); ok && len(list) == 2 && list[0] == "CONFLICT" {
		return fmt.Errorf("redisstore: restart %q: the run is in execution %s, not %d: %w",
			id, str(list[1]), req.IfExecution, storage.ErrConflict)
	}
	if list, ok := v.([]any); ok && len(list) == 2 && list[0] == "BADARG" {
		return fmt.Errorf("redisstore: restart %q from %q: execution %s has no checkpoint of the key: %w",
			id, req.FromKey, str(list[1]), storage.ErrInvalidArgument)
	}
	_, err = status("restart", id, v)
	return err
}

// control runs one of the scripts that take only a run ID.
func (s *Store) control(ctx context.Context, op string, sc *redis.Script, id string, keys ...string) error {
	v, err := s.run(ctx, sc, keys, id)
	if err != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, id, err)
	}
	_, err = status(op, id, v)
	return err
}
