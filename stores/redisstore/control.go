package redisstore

import (
	"context"
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
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	errJSON, err := encodeError(&req.Error)
	if err != nil {
		return err
	}
	id := req.RunID
	v, err := s.run(ctx, terminateScript, []string{s.keys.run(id)}, append([]any{id, errJSON}, notifyArgs(req.Notify)...)...)
	if err != nil {
		return fmt.Errorf("redisstore: terminate %q: %w", id, err)
	}
	_, err = status("terminate", id, v)
	return err
}

// Restart implements storage.Store.
func (s *Store) Restart(ctx context.Context, runID string) error {
	return s.control(ctx, "restart", restartScript, runID,
		s.keys.run(runID), s.keys.checkpoints(runID), s.keys.attempts(runID))
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
