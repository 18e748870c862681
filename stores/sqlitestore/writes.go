package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/stemflow/stem/storage"
)

// CreateRuns inserts runs; an ID that exists is left untouched and reported
// with Created false and its stored record. All requests are one atomic
// change.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	for i, r := range runs {
		if r.ID == "" || r.Workflow == "" {
			return nil, fmt.Errorf("sqlitestore: create runs: %w: run %d has an empty ID or workflow", storage.ErrInvalidArgument, i)
		}
	}
	var out []storage.CreateResult
	err := s.write(ctx, "create runs", func(w *wtx) error {
		out = make([]storage.CreateResult, 0, len(runs))
		now := s.now()
		n := now.UnixNano()
		for _, r := range runs {
			changed, err := w.exec(`INSERT INTO runs (id, workflow, parent_id, status, ready_at, created_at, updated_at)
				VALUES (?1, ?2, ?3, 'queued', ?4, ?4, ?4) ON CONFLICT (id) DO NOTHING`,
				r.ID, r.Workflow, r.ParentID, n)
			if err != nil {
				return err
			}
			if changed == 1 {
				if _, err := w.exec(`INSERT INTO run_data (ref, input) VALUES (last_insert_rowid(), ?1)`, bytesArg(r.Input)); err != nil {
					return err
				}
				w.wake = true
			}
			rec, _, err := getRun(w.conn, r.ID)
			if err != nil {
				return err
			}
			out = append(out, storage.CreateResult{Created: changed == 1, Run: rec})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Claim leases up to req.Limit ready runs of the named workflows: queued or
// waiting runs whose ReadyAt has come, and running runs whose lease expired,
// oldest first.
func (s *Store) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if req.Owner == "" || req.LeaseFor <= 0 {
		return nil, fmt.Errorf("sqlitestore: claim: %w: empty owner or lease length %v", storage.ErrInvalidArgument, req.LeaseFor)
	}
	if req.Limit <= 0 || len(req.Workflows) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.isClosed.Load() {
			return nil, storage.ErrClosed
		}
		return nil, nil
	}
	query, args := claimQuery(req.Workflows)
	var out []storage.ClaimedRun
	err := s.write(ctx, "claim", func(w *wtx) error {
		out = nil
		now := s.now()
		n := now.UnixNano()
		until := leaseUntil(now, req.LeaseFor)
		args[0], args[1] = n, req.Limit
		var ids []string
		if err := w.query(query, func(r row) error {
			ids = append(ids, r.str(0))
			return nil
		}, args...); err != nil {
			return err
		}
		for _, id := range ids {
			var cr storage.ClaimedRun
			var ref int64
			found, err := w.queryRow(`UPDATE runs SET
					status = 'running', ready_at = NULL, owner = ?2, lease_until = ?3, token = token + 1,
					recoveries = recoveries + (status = 'running'), updated_at = ?4
				WHERE id = ?1
				RETURNING token, workflow, parent_id, recoveries,
					wait_key, wait_topic, wait_kind, wait_deadline, lease_until, ref`, func(r row) {
				cr = storage.ClaimedRun{
					Lease:      storage.Lease{RunID: id, Owner: req.Owner, Token: r.int64(0)},
					Workflow:   r.str(1),
					ParentID:   r.str(2),
					Recoveries: int(r.int64(3)),
					Wait:       scanWait(r, 4),
					LeaseUntil: r.time(8),
				}
				ref = r.int64(9)
			}, id, req.Owner, until, n)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			if _, err := w.queryRow(`SELECT input, suspend_state FROM run_data WHERE ref = ?1`, func(r row) {
				cr.Input, cr.SuspendState = r.bytes(0), r.bytes(1)
			}, ref); err != nil {
				return err
			}
			out = append(out, cr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimQuery returns the statement that picks the runs to claim and its
// arguments (now and the limit first, to be filled in). It is one ordered
// range scan of runs_claim, pinned with INDEXED BY so that no plan ever
// sorts the workflow's runs instead, and it stops at the limit however many
// runs are ready. A few workflows are bound one by one; many as a JSON list.
func claimQuery(workflows []string) (string, []any) {
	args := []any{int64(0), 0}
	var in string
	if len(workflows) <= 8 {
		in = "?3"
		for i := 4; i < 3+len(workflows); i++ {
			in += ", ?" + strconv.Itoa(i)
		}
		for _, wf := range workflows {
			args = append(args, wf)
		}
	} else {
		b, _ := json.Marshal(workflows)
		in = "SELECT value FROM json_each(?3)"
		args = append(args, string(b))
	}
	return `SELECT id FROM runs INDEXED BY runs_claim
		WHERE claim_at <= ?1 AND workflow IN (` + in + `)
		ORDER BY claim_at LIMIT ?2`, args
}

// fenceState is what fenced writes check and branch on.
type fenceState struct {
	ref            int64 // the run's row
	pauseRequested bool
}

// fence checks, inside the writing transaction, that the run is running
// and its token is the lease's: otherwise (an unknown run included) the
// lease is lost.
func (w *wtx) fence(l storage.Lease) (fenceState, error) {
	var st fenceState
	var status string
	var token int64
	found, err := w.queryRow(`SELECT status, token, pause_requested, ref FROM runs WHERE id = ?1`, func(r row) {
		status, token = r.str(0), r.int64(1)
		st.pauseRequested = r.int64(2) != 0
		st.ref = r.int64(3)
	}, l.RunID)
	if err != nil {
		return st, err
	}
	if !found || status != string(storage.StatusRunning) || token != l.Token {
		return st, leaseLost(l)
	}
	return st, nil
}

func leaseLost(l storage.Lease) error {
	return fmt.Errorf("run %q token %d: %w", l.RunID, l.Token, storage.ErrLeaseLost)
}

// extendLease sets the lease of a fenced run to until.
func (w *wtx) extendLease(runID string, until, now int64) error {
	_, err := w.exec(`UPDATE runs SET lease_until = ?2, updated_at = ?3 WHERE id = ?1`, runID, until, now)
	return err
}

// insertCheckpoint writes cp, with the attempts that produced it, unless the
// run has a checkpoint for its key; written reports which.
func (w *wtx) insertCheckpoint(ref int64, cp *storage.Checkpoint, attempts []storage.Attempt, now int64) (written bool, err error) {
	n, err := w.exec(`INSERT INTO checkpoints (run_ref, key, kind, output, error_message, error_code, attempts, created_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (run_ref, key) DO NOTHING`,
		ref, cp.Key, string(cp.Kind), bytesArg(cp.Output), errMsg(cp.Error), errCode(cp.Error),
		bytesArg(encodeAttempts(attempts)), now)
	return n == 1, err
}

// loadCheckpoint returns the run's checkpoint for key, or nil.
func (w *wtx) loadCheckpoint(ref int64, key string) (*storage.Checkpoint, error) {
	var cp *storage.Checkpoint
	_, err := w.queryRow(`SELECT `+checkpointCols+` FROM checkpoints WHERE run_ref = ?1 AND key = ?2`, func(r row) {
		c := scanCheckpoint(r)
		cp = &c
	}, ref, key)
	return cp, err
}

// insertAttempts appends attempts recorded on their own, noting for each
// whether its step's checkpoint exists already.
func (w *wtx) insertAttempts(ref int64, attempts []storage.Attempt) error {
	for _, a := range attempts {
		if _, err := w.exec(`INSERT INTO attempts (run_ref, key, number, started_at, ended_at, error, after_checkpoint)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, EXISTS (SELECT 1 FROM checkpoints WHERE run_ref = ?1 AND key = ?2))`,
			ref, a.Key, a.Number, nanos(a.Started), nanos(a.Ended), a.Error); err != nil {
			return err
		}
	}
	return nil
}

func errLeaseFor(op string, d time.Duration) error {
	return fmt.Errorf("sqlitestore: %s: %w: lease length %v", op, storage.ErrInvalidArgument, d)
}

func validCheckpoint(cp *storage.Checkpoint) error {
	if cp.Key == "" {
		return fmt.Errorf("%w: empty checkpoint key", storage.ErrInvalidArgument)
	}
	return nil
}

// Checkpoint records a step's result under the lease; see storage.Store.
func (s *Store) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (storage.CheckpointResult, error) {
	if err := validCheckpoint(&req.Checkpoint); err != nil {
		return storage.CheckpointResult{}, fmt.Errorf("sqlitestore: checkpoint: %w", err)
	}
	if req.LeaseFor <= 0 {
		return storage.CheckpointResult{}, errLeaseFor("checkpoint", req.LeaseFor)
	}
	var res storage.CheckpointResult
	l := req.Lease
	err := s.write(ctx, "checkpoint", func(w *wtx) error {
		res = storage.CheckpointResult{}
		now := s.now()
		n := now.UnixNano()
		until := leaseUntil(now, req.LeaseFor)
		// The fence, and what the write depends on: a requested pause, a
		// wait this checkpoint resolves (an event wait that timed out).
		var pause, resolvesWait bool
		var ref int64
		found, err := w.queryRow(`SELECT pause_requested, wait_key IS ?3, ref FROM runs
			WHERE id = ?1 AND status = 'running' AND token = ?2`,
			func(r row) { pause, resolvesWait, ref = r.int64(0) != 0, r.int64(1) != 0, r.int64(2) },
			l.RunID, l.Token, req.Checkpoint.Key)
		if err != nil {
			return err
		}
		if !found {
			return leaseLost(l)
		}
		written, err := w.insertCheckpoint(ref, &req.Checkpoint, req.Attempts, n)
		if err != nil {
			return err
		}
		if !written {
			// Written before (an event delivered while the worker decided a
			// timeout): extend the lease, nothing more.
			if err := w.extendLease(l.RunID, until, n); err != nil {
				return err
			}
			res.Existing, err = w.loadCheckpoint(ref, req.Checkpoint.Key)
			return err
		}
		switch {
		case pause:
			// The pause takes effect: the run is parked, its lease released.
			_, err = w.exec(`UPDATE runs SET status = 'paused', pause_requested = 0, recoveries = 0,
					ready_at = ?2, updated_at = ?2, `+releaseLease("?2")+`,
					wait_key = iif(?3, NULL, wait_key), wait_topic = iif(?3, NULL, wait_topic),
					wait_kind = iif(?3, NULL, wait_kind), wait_deadline = iif(?3, NULL, wait_deadline)
				WHERE ref = ?1`, ref, n, resolvesWait)
			res.Paused = true
		case resolvesWait:
			_, err = w.exec(`UPDATE runs SET lease_until = ?2, recoveries = 0, updated_at = ?3,
					wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL
				WHERE ref = ?1`, ref, until, n)
		default:
			_, err = w.exec(`UPDATE runs SET lease_until = ?2, recoveries = 0, updated_at = ?3 WHERE ref = ?1`, ref, until, n)
		}
		return err
	})
	if err != nil {
		return storage.CheckpointResult{}, err
	}
	return res, nil
}

// RecordAttempts appends attempts under the lease and extends it.
func (s *Store) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	lease, leaseFor, attempts := req.Lease, req.LeaseFor, req.Attempts
	if leaseFor <= 0 {
		return errLeaseFor("record attempts", leaseFor)
	}
	return s.write(ctx, "record attempts", func(w *wtx) error {
		st, err := w.fence(lease)
		if err != nil {
			return err
		}
		now := s.now()
		if err := w.insertAttempts(st.ref, attempts); err != nil {
			return err
		}
		return w.extendLease(lease.RunID, leaseUntil(now, leaseFor), now.UnixNano())
	})
}

// Heartbeat extends the lease to now+leaseFor, fenced.
func (s *Store) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) error {
	lease, leaseFor := req.Lease, req.LeaseFor
	if leaseFor <= 0 {
		return errLeaseFor("heartbeat", leaseFor)
	}
	return s.write(ctx, "heartbeat", func(w *wtx) error {
		now := s.now()
		changed, err := w.exec(`UPDATE runs SET lease_until = ?3, updated_at = ?4
			WHERE id = ?1 AND status = 'running' AND token = ?2`,
			lease.RunID, lease.Token, leaseUntil(now, leaseFor), now.UnixNano())
		if err != nil {
			return err
		}
		if changed == 0 {
			return leaseLost(lease)
		}
		return nil
	})
}

// Suspend parks a running run, fenced; see storage.Store.
func (s *Store) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	if req.Checkpoint != nil {
		if err := validCheckpoint(req.Checkpoint); err != nil {
			return storage.SuspendResult{}, fmt.Errorf("sqlitestore: suspend: %w", err)
		}
	}
	if req.Wait != nil && (req.Wait.Key == "" || req.Wait.Topic == "") {
		return storage.SuspendResult{}, fmt.Errorf("sqlitestore: suspend: %w: wait needs a key and a topic", storage.ErrInvalidArgument)
	}
	var res storage.SuspendResult
	l := req.Lease
	err := s.write(ctx, "suspend", func(w *wtx) error {
		res = storage.SuspendResult{}
		st, err := w.fence(l)
		if err != nil {
			return err
		}
		now := s.now()
		n := now.UnixNano()
		progressed := false
		if req.Checkpoint != nil {
			if progressed, err = w.insertCheckpoint(st.ref, req.Checkpoint, nil, n); err != nil {
				return err
			}
		}
		if wt := req.Wait; wt != nil {
			cp, err := w.loadCheckpoint(st.ref, wt.Key)
			if err != nil {
				return err
			}
			if cp == nil {
				// The oldest buffered event of the topic, consumed.
				var evID int64
				var payload []byte
				found, err := w.queryRow(`SELECT id, payload FROM events WHERE run_ref = ?1 AND topic = ?2 ORDER BY id LIMIT 1`,
					func(r row) { evID, payload = r.int64(0), r.bytes(1) }, st.ref, wt.Topic)
				if err != nil {
					return err
				}
				if found {
					if _, err := w.exec(`DELETE FROM events WHERE id = ?1`, evID); err != nil {
						return err
					}
					if _, err := w.insertCheckpoint(st.ref, &storage.Checkpoint{Key: wt.Key, Kind: kindOf(wt.Kind), Output: payload}, nil, n); err != nil {
						return err
					}
					if cp, err = w.loadCheckpoint(st.ref, wt.Key); err != nil {
						return err
					}
					progressed = true
				}
			}
			if cp != nil {
				// Satisfied at once: not parked, the lease goes on.
				res.Delivered = cp
				_, err := w.exec(`UPDATE runs SET lease_until = iif(?6, ?2, lease_until), updated_at = ?3,
						recoveries = iif(?4, 0, recoveries),
						wait_topic    = iif(wait_key IS ?5, NULL, wait_topic),
						wait_kind     = iif(wait_key IS ?5, NULL, wait_kind),
						wait_deadline = iif(wait_key IS ?5, NULL, wait_deadline),
						wait_key      = iif(wait_key IS ?5, NULL, wait_key)
					WHERE id = ?1`, l.RunID, leaseUntil(now, req.LeaseFor), n, progressed, wt.Key, req.LeaseFor > 0)
				return err
			}
		}
		// Park.
		status := storage.StatusWaiting
		if req.ReadyAt != nil && !req.ReadyAt.After(now) {
			status = storage.StatusQueued
		}
		if st.pauseRequested {
			status = storage.StatusPaused
			res.Paused = true
		}
		var waitKey, waitTopic, waitKind, waitDeadline any
		keepWait := true
		if wt := req.Wait; wt != nil {
			keepWait = false
			waitKey, waitTopic, waitKind, waitDeadline = wt.Key, wt.Topic, string(wt.Kind), nanosPtr(wt.Deadline)
		}
		if _, err := w.exec(`UPDATE run_data SET suspend_state = ?2 WHERE ref = ?1`, st.ref, bytesArg(req.SuspendState)); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE runs SET status = ?2, ready_at = ?3, pause_requested = 0,
				updated_at = ?4, `+releaseLease("?4")+`,
				recoveries = iif(?5, 0, recoveries),
				wait_key      = iif(?6, wait_key, ?7),
				wait_topic    = iif(?6, wait_topic, ?8),
				wait_kind     = iif(?6, wait_kind, ?9),
				wait_deadline = iif(?6, wait_deadline, ?10)
			WHERE ref = ?1`,
			st.ref, string(status), nanosPtr(req.ReadyAt), n, progressed,
			keepWait, waitKey, waitTopic, waitKind, waitDeadline); err != nil {
			return err
		}
		if status == storage.StatusQueued {
			w.wake = true
		}
		return nil
	})
	if err != nil {
		return storage.SuspendResult{}, err
	}
	return res, nil
}

// Complete finishes a run, fenced, and delivers req.Notify in the same
// change.
func (s *Store) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if req.Status != storage.StatusComplete && req.Status != storage.StatusErrored {
		return fmt.Errorf("sqlitestore: complete: %w: status %q is not complete or errored", storage.ErrInvalidArgument, req.Status)
	}
	if err := validNotify(req.Notify); err != nil {
		return fmt.Errorf("sqlitestore: complete: %w", err)
	}
	return s.write(ctx, "complete", func(w *wtx) error {
		if _, err := w.fence(req.Lease); err != nil {
			return err
		}
		n := s.now().UnixNano()
		if err := w.finish(req.Lease.RunID, req.Status, bytesArg(req.Output), req.Error, n); err != nil {
			return err
		}
		return w.notify(req.Notify, n)
	})
}

// finish puts a run in a final status, clearing lease, wait and suspension.
func (w *wtx) finish(runID string, status storage.RunStatus, output any, e *storage.ErrorInfo, now int64) error {
	_, err := w.exec(`UPDATE runs SET status = ?2,
			pause_requested = 0, ready_at = NULL, updated_at = ?3, `+releaseLease("?3")+`,
			wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL
		WHERE id = ?1`, runID, string(status), now)
	if err != nil {
		return err
	}
	_, err = w.exec(`UPDATE run_data SET output = ?2, error_message = ?3, error_code = ?4, suspend_state = NULL
		WHERE ref = (SELECT ref FROM runs WHERE id = ?1)`, runID, output, errMsg(e), errCode(e))
	return err
}

func validNotify(ev *storage.Event) error {
	if ev != nil && (ev.RunID == "" || ev.Topic == "") {
		return fmt.Errorf("%w: notify event needs a run ID and a topic", storage.ErrInvalidArgument)
	}
	return nil
}

// notify delivers a finishing run's event to its target as SendEvent would.
// A target that no longer exists or has finished cannot take it; the event
// is dropped rather than keep the sender from finishing.
func (w *wtx) notify(ev *storage.Event, now int64) error {
	if ev == nil {
		return nil
	}
	_, err := w.sendEvent(*ev, now)
	if err != nil && (errors.Is(err, storage.ErrRunNotFound) || errors.Is(err, storage.ErrInvalidState)) {
		return nil
	}
	return err
}

// Pause pauses a run; see storage.Store.
func (s *Store) Pause(ctx context.Context, runID string) error {
	return s.write(ctx, "pause", func(w *wtx) error {
		status, err := w.status(runID)
		if err != nil {
			return err
		}
		n := s.now().UnixNano()
		switch status {
		case storage.StatusQueued, storage.StatusWaiting:
			_, err = w.exec(`UPDATE runs SET status = 'paused', updated_at = ?2 WHERE id = ?1`, runID, n)
		case storage.StatusRunning:
			_, err = w.exec(`UPDATE runs SET pause_requested = 1, updated_at = ?2 WHERE id = ?1 AND NOT pause_requested`, runID, n)
		case storage.StatusPaused:
		default:
			err = fmt.Errorf("%w: pause a %s run", storage.ErrInvalidState, status)
		}
		return err
	})
}

// Resume undoes Pause; see storage.Store.
func (s *Store) Resume(ctx context.Context, runID string) error {
	return s.write(ctx, "resume", func(w *wtx) error {
		status, err := w.status(runID)
		if err != nil {
			return err
		}
		n := s.now().UnixNano()
		switch status {
		case storage.StatusPaused:
			_, err = w.exec(`UPDATE runs SET status = iif(ready_at <= ?2, 'queued', 'waiting'), updated_at = ?2 WHERE id = ?1`, runID, n)
			w.wake = true
		case storage.StatusRunning:
			var changed int64
			changed, err = w.exec(`UPDATE runs SET pause_requested = 0, updated_at = ?2 WHERE id = ?1 AND pause_requested`, runID, n)
			if err == nil && changed == 0 {
				err = fmt.Errorf("%w: resume a running run with no pause requested", storage.ErrInvalidState)
			}
		default:
			err = fmt.Errorf("%w: resume a %s run", storage.ErrInvalidState, status)
		}
		return err
	})
}

// Terminate ends an unfinished run; see storage.Store.
func (s *Store) Terminate(ctx context.Context, req storage.TerminateRequest) error {
	if err := validNotify(req.Notify); err != nil {
		return fmt.Errorf("sqlitestore: terminate: %w", err)
	}
	return s.write(ctx, "terminate", func(w *wtx) error {
		status, err := w.status(req.RunID)
		if err != nil {
			return err
		}
		if status.Finished() {
			return fmt.Errorf("%w: terminate a %s run", storage.ErrInvalidState, status)
		}
		n := s.now().UnixNano()
		e := req.Error
		if err := w.finish(req.RunID, storage.StatusTerminated, nil, &e, n); err != nil {
			return err
		}
		return w.notify(req.Notify, n)
	})
}

// Restart drops a run's checkpoints, attempts, wait and suspension state and
// queues it again; see storage.Store.
func (s *Store) Restart(ctx context.Context, runID string) error {
	return s.write(ctx, "restart", func(w *wtx) error {
		if _, err := w.status(runID); err != nil {
			return err
		}
		n := s.now().UnixNano()
		if _, err := w.exec(`DELETE FROM checkpoints WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1)`, runID); err != nil {
			return err
		}
		if _, err := w.exec(`DELETE FROM attempts WHERE run_ref = (SELECT ref FROM runs WHERE id = ?1)`, runID); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE run_data SET output = NULL, error_message = NULL, error_code = NULL, suspend_state = NULL
			WHERE ref = (SELECT ref FROM runs WHERE id = ?1)`, runID); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE runs SET status = 'queued', ready_at = ?2, pause_requested = 0, recoveries = 0,
				updated_at = ?2, `+releaseLease("?2")+`,
				wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL
			WHERE id = ?1`, runID, n); err != nil {
			return err
		}
		w.wake = true
		return nil
	})
}

// status returns a run's status, or storage.ErrRunNotFound.
func (w *wtx) status(runID string) (storage.RunStatus, error) {
	var status storage.RunStatus
	found, err := w.queryRow(`SELECT status FROM runs WHERE id = ?1`, func(r row) { status = storage.RunStatus(r.str(0)) }, runID)
	if err == nil && !found {
		err = storage.ErrRunNotFound
	}
	return status, err
}

// Emit delivers an event to every run waiting on the topic; see
// storage.Store.
func (s *Store) Emit(ctx context.Context, req storage.EmitRequest) ([]string, error) {
	topic, payload := req.Topic, req.Payload
	if topic == "" {
		return nil, fmt.Errorf("sqlitestore: emit: %w: empty topic", storage.ErrInvalidArgument)
	}
	var ids []string
	err := s.write(ctx, "emit", func(w *wtx) error {
		ids = nil
		n := s.now().UnixNano()
		var waiting []waiter
		if err := w.query(`SELECT id, status, wait_key, wait_kind, ref FROM runs WHERE wait_topic = ?1 ORDER BY id`, func(r row) error {
			waiting = append(waiting, waiter{id: r.str(0), status: storage.RunStatus(r.str(1)), key: r.str(2), kind: r.str(3), ref: r.int64(4)})
			return nil
		}, topic); err != nil {
			return err
		}
		for _, wt := range waiting {
			if err := w.deliver(wt, payload, n); err != nil {
				return err
			}
			ids = append(ids, wt.id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// SendEvent delivers an event to one run, or buffers it; see storage.Store.
func (s *Store) SendEvent(ctx context.Context, ev storage.Event) (bool, error) {
	if ev.Topic == "" {
		return false, fmt.Errorf("sqlitestore: send event: %w: empty topic", storage.ErrInvalidArgument)
	}
	var delivered bool
	err := s.write(ctx, "send event", func(w *wtx) error {
		var err error
		delivered, err = w.sendEvent(ev, s.now().UnixNano())
		return err
	})
	if err != nil {
		return false, err
	}
	return delivered, nil
}

// waiter is a run waiting on a topic.
type waiter struct {
	ref       int64
	id        string
	status    storage.RunStatus
	key, kind string
}

func (w *wtx) sendEvent(ev storage.Event, now int64) (bool, error) {
	var wt waiter
	var topic *string
	found, err := w.queryRow(`SELECT status, wait_key, wait_kind, wait_topic, ref FROM runs WHERE id = ?1`, func(r row) {
		wt = waiter{id: ev.RunID, status: storage.RunStatus(r.str(0)), key: r.str(1), kind: r.str(2), ref: r.int64(4)}
		if !r.isNull(3) {
			t := r.str(3)
			topic = &t
		}
	}, ev.RunID)
	if err != nil {
		return false, err
	}
	if !found {
		return false, storage.ErrRunNotFound
	}
	if wt.status.Finished() {
		return false, fmt.Errorf("%w: send an event to a %s run", storage.ErrInvalidState, wt.status)
	}
	if topic != nil && *topic == ev.Topic {
		return true, w.deliver(wt, ev.Payload, now)
	}
	_, err = w.exec(`INSERT INTO events (run_ref, topic, payload, created_at) VALUES (?1, ?2, ?3, ?4)`,
		wt.ref, ev.Topic, bytesArg(ev.Payload), now)
	return false, err
}

// deliver writes payload as the checkpoint of the run's wait, removes the
// wait and makes a waiting run queued (a paused one stays paused), ready
// now.
func (w *wtx) deliver(wt waiter, payload []byte, now int64) error {
	written, err := w.insertCheckpoint(wt.ref, &storage.Checkpoint{Key: wt.key, Kind: kindOf(storage.CheckpointKind(wt.kind)), Output: payload}, nil, now)
	if err != nil {
		return err
	}
	_, err = w.exec(`UPDATE runs SET
			status = iif(status = 'waiting', 'queued', status),
			ready_at = CASE
				WHEN status = 'paused' THEN ?2
				WHEN status IN ('waiting', 'queued') AND (ready_at IS NULL OR ready_at > ?2) THEN ?2
				ELSE ready_at END,
			recoveries = iif(?3, 0, recoveries),
			wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL,
			updated_at = ?2
		WHERE ref = ?1`, wt.ref, now, written)
	if wt.status == storage.StatusWaiting || wt.status == storage.StatusQueued {
		w.wake = true
	}
	return err
}

// releaseLease returns the SQL assignment that ends the current lease at
// now, the parameter nowParam; owner and token keep describing it.
func releaseLease(nowParam string) string {
	return `lease_until = iif(lease_until > ` + nowParam + `, ` + nowParam + `, lease_until)`
}

// kindOf is the kind of a checkpoint written for a wait: KindEvent unless
// the wait names another.
func kindOf(k storage.CheckpointKind) storage.CheckpointKind {
	if k == "" {
		return storage.KindEvent
	}
	return k
}
