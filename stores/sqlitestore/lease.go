package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// Claim leases up to req.Limit ready runs of the named workflows, at the
// versions req.Versions allows: queued or waiting runs whose ReadyAt has
// come, and running runs whose lease expired, oldest first. A run of
// another version is passed over by the statements that read the claim
// indexes, so it takes none of the claim's limit. Each claimed run brings
// its replay, read in the claim's transaction, unless its history passes
// claimReplayBudget.
func (s *Store) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	var cs *claimStmts
	if !req.Empty() {
		cs = s.claims.get(req.Workflows, req.Versions)
	}
	if cs == nil {
		// Nothing to claim: no write, but the answers a write would give.
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sqlitestore: claim: %w", err)
		}
		if s.isClosed.Load() {
			return nil, fmt.Errorf("sqlitestore: claim: %w", storage.ErrClosed)
		}
		return nil, nil
	}
	queues := req.ClaimQueues()
	var out []storage.ClaimedRun
	err := s.writeLease(ctx, "claim", func(w *wtx) error {
		out = nil
		now := s.now()
		n := now.UnixNano()
		until := leaseUntil(now, req.LeaseFor)
		picked, err := w.pick(cs, queues, req.Limit, n)
		if err != nil {
			return err
		}
		for _, p := range picked {
			var cr storage.ClaimedRun
			var scanErr error
			found, err := w.queryRow(claimUpdate, func(r row) {
				cr = storage.ClaimedRun{
					Lease:      storage.Lease{RunID: r.str(0), Owner: req.Owner, Token: r.int64(1)},
					Workflow:   r.str(2),
					ParentID:   r.str(3),
					Recoveries: int(r.int64(4)),
					LeaseUntil: r.time(5),
					Deadline:   r.timePtr(6),
					Version:    int(r.int64(7)),
				}
				cr.Wait, scanErr = scanWait(r, 8)
				cr.CancelRequested, cr.CancelReason = scanCancel(r, 13)
			}, p.ref, req.Owner, until, n)
			if err == nil && scanErr != nil {
				err = fmt.Errorf("run %q: %w", cr.Lease.RunID, scanErr)
			}
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			id, ref := cr.Lease.RunID, p.ref
			if p.logStart != "" {
				if _, err := w.exec(`INSERT INTO queue_starts (queue, at) VALUES (?1, ?2)`, p.logStart, n); err != nil {
					return err
				}
			}
			// The run's payloads and headers: a NULL column read for a
			// run without headers, and nothing decoded.
			if _, err := w.queryRow(`SELECT input, suspend_state, headers FROM run_data WHERE ref = ?1`, func(r row) {
				cr.Input, cr.SuspendState = r.bytes(0), r.bytes(1)
				cr.Headers, scanErr = decodeHeaders(r, 2)
			}, ref); err != nil {
				return err
			}
			if scanErr != nil {
				return fmt.Errorf("run %q: %w", id, scanErr)
			}
			// The worker's replay, read here where the pages are in the
			// writer's cache already; a long history is left to
			// LoadReplay, on a read connection, not to hold the writer.
			rp, _, complete, err := readReplay(w.conn, id, claimReplayBudget)
			if err != nil {
				return err
			}
			if complete {
				cr.Replay = &rp
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

// claimReplayBudget bounds the bytes of checkpoints and attempts a claim
// reads to bring each run's replay (see readReplay): beyond it the claim
// brings none and the worker calls LoadReplay.
const claimReplayBudget = 256 << 10

// claimUpdate leases the run ?1 (its ref) to ?2 until ?3 at ?4: a
// recovery's count grows, a start (the first claim since its creation or
// restart) is stamped for its queue's rate, and a hold ends. It returns
// the run's requested cancellation, if any, after its wait.
const claimUpdate = `UPDATE runs SET
		status = 'running', ready_at = NULL, owner = ?2, lease_until = ?3, token = token + 1,
		recoveries = recoveries + (status = 'running'), updated_at = ?4, first_claimed_at = coalesce(first_claimed_at, ?4),
		hold = NULL, ` + clearActive + `
	WHERE ref = ?1
	RETURNING id, token, workflow, parent_id, recoveries, lease_until, deadline, version, ` + waitCols + `, cancel_reason`

// Heartbeat extends the lease to now+leaseFor, fenced, stores the step
// running, when named, as the run's Active step, and reports a requested
// pause and a requested cancellation. A lost lease says why.
func (s *Store) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	if err := req.Validate(); err != nil {
		return storage.HeartbeatResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	lease, leaseFor, step, progress := req.Lease, req.LeaseFor, req.Step, req.Progress
	// A heartbeat only keeps a lease, which SyncFull may commit lazily (see
	// writeLease); one that publishes progress is a write like a
	// checkpoint, durable when it returns.
	enqueue := s.writeLease
	if progress != nil {
		enqueue = s.write
	}
	var res storage.HeartbeatResult
	err := enqueue(ctx, "heartbeat", func(w *wtx) error {
		res = storage.HeartbeatResult{}
		now := s.now()
		var key, attempt, started any
		if step != nil {
			key, attempt, started = step.Key, step.Attempt, nanos(step.Started)
		}
		var ref int64
		found, err := w.queryRow(`UPDATE runs SET lease_until = ?3, updated_at = ?4,
				active_key = iif(?5 IS NULL, active_key, ?5),
				active_attempt = iif(?5 IS NULL, active_attempt, ?6),
				active_started = iif(?5 IS NULL, active_started, ?7)
			WHERE id = ?1 AND status = 'running' AND token = ?2
			RETURNING pause_requested, ref, cancel_reason IS NOT NULL`, func(r row) {
			res.PauseRequested, ref, res.CancelRequested = r.int64(0) != 0, r.int64(1), r.int64(2) != 0
		}, lease.RunID, lease.Token, leaseUntil(now, leaseFor), now.UnixNano(), key, attempt, started)
		if err != nil {
			return err
		}
		if !found {
			return w.lost(lease, now)
		}
		return w.publish(ref, progress)
	})
	if err != nil {
		return storage.HeartbeatResult{}, err
	}
	return res, nil
}

// lost is the error of a fenced write whose lease l does not hold, with the
// reason judged from the run as this transaction sees it.
func (w *wtx) lost(l storage.Lease, now time.Time) error {
	var status string
	var token int64
	var until time.Time
	found, err := w.queryRow(`SELECT status, token, lease_until FROM runs WHERE id = ?1`, func(r row) {
		status, token, until = r.str(0), r.int64(1), r.time(2)
	}, l.RunID)
	if err != nil {
		return err
	}
	return storage.LeaseLost("", l, found, storage.RunStatus(status), token, until, now)
}

// letGo applies a release by the holder of a lease that a Restart revoked
// while it was live: the new execution becomes ready now and the old lease
// ends. It reports false, changing nothing, when l is not such a lease.
func (w *wtx) letGo(l storage.Lease, now time.Time) (bool, error) {
	n := now.UnixNano()
	var status string
	found, err := w.queryRow(`UPDATE runs SET ready_at = ?3, `+releaseLease("?3")+`,
			status = iif(status = 'waiting', 'queued', status), updated_at = ?3
		WHERE id = ?1 AND token = ?2 AND status IN ('queued', 'waiting', 'paused') AND lease_until > ?3
		RETURNING status`, func(r row) { status = r.str(0) }, l.RunID, l.Token, n)
	if err != nil || !found {
		return false, err
	}
	if status == string(storage.StatusQueued) {
		w.wake = true
	}
	return true, nil
}

// Suspend parks a running run, fenced; see storage.Store.
func (s *Store) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	if err := req.Validate(); err != nil {
		return storage.SuspendResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	hold, err := encodeHold(req.Hold)
	if err != nil {
		return storage.SuspendResult{}, fmt.Errorf("sqlitestore: suspend: %w", err)
	}
	var res storage.SuspendResult
	l := req.Lease
	err = s.write(ctx, "suspend", func(w *wtx) error {
		res = storage.SuspendResult{}
		now := s.now()
		st, err := w.fenceAt(l, now)
		if errors.Is(err, storage.ErrLeaseLost) && req.Releases(now) {
			// The holder of a lease a restart revoked lets go.
			if ok, lerr := w.letGo(l, now); lerr != nil || ok {
				return lerr
			}
		}
		if err != nil {
			return err
		}
		n := now.UnixNano()
		if f := req.Refuse; f != nil {
			// Take the delivered event back, and record why.
			deleted, err := w.exec(`DELETE FROM checkpoints WHERE run_ref = ?1 AND execution = ?2 AND key = ?3 AND kind = ?4`,
				st.ref, st.execution, f.Key, string(storage.KindEvent))
			if err != nil {
				return err
			}
			if deleted == 0 {
				return fmt.Errorf("%w: refuse the event of %q: run %q has no event checkpoint of it", storage.ErrInvalidState, f.Key, l.RunID)
			}
			if err := w.insertAttempts(st.ref, st.execution, []storage.Attempt{f.Attempt}); err != nil {
				return err
			}
		}
		progressed := false
		if req.Checkpoint != nil {
			if progressed, err = w.insertCheckpoint(st.ref, st.execution, req.Checkpoint, nil, n); err != nil {
				return err
			}
		}
		if wt := req.Wait; wt != nil {
			cp, err := w.satisfy(st, l.RunID, wt, now, req.LeaseFor, progressed, false, req.Progress)
			if err != nil || cp != nil {
				res.Delivered = cp
				return err
			}
		}
		// Park.
		readyAt := parkReadyAt(req, st.cancelRequested, now)
		status := storage.StatusWaiting
		if readyAt != nil && !readyAt.After(now) {
			status = storage.StatusQueued
		}
		if st.pauseRequested {
			status = storage.StatusPaused
			res.Paused = true
		}
		keepWait := req.Wait == nil
		waitKey, waitTopic, waitKind, waitDeadline, waitAlso := waitArgs(req.Wait)
		if _, err := w.exec(`UPDATE run_data SET suspend_state = ?2, progress = coalesce(?3, progress) WHERE ref = ?1`,
			st.ref, bytesArg(req.SuspendState), bytesArg(req.Progress)); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE runs SET status = ?2, ready_at = ?3, pause_requested = 0,
				updated_at = ?4, `+releaseLease("?4")+`, `+clearActive+`,
				recoveries = iif(?5, 0, recoveries),
				wait_key      = iif(?6, wait_key, ?7),
				wait_topic    = iif(?6, wait_topic, ?8),
				wait_kind     = iif(?6, wait_kind, ?9),
				wait_deadline = iif(?6, wait_deadline, ?10),
				wait_also     = iif(?6, wait_also, ?11),
				hold = ?12
			WHERE ref = ?1`,
			st.ref, string(status), nanosPtr(readyAt), n, progressed,
			keepWait, waitKey, waitTopic, waitKind, waitDeadline, waitAlso, hold); err != nil {
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

// parkReadyAt is when a run parked by req at now is ready: req.ReadyAt,
// or now when its cancellation is requested (cancelRequested) and its
// worker has yet to see it, so that a worker takes it again at once. A
// hold is kept as asked.
func parkReadyAt(req storage.SuspendRequest, cancelRequested bool, now time.Time) *time.Time {
	if cancelRequested && !req.CancelSeen && req.Hold == nil && (req.ReadyAt == nil || req.ReadyAt.After(now)) {
		return &now
	}
	return req.ReadyAt
}

// TakeEvent resolves a wait without parking, fenced, as Suspend's
// delivery does; see storage.Store. The step still running stays the
// run's active one.
func (s *Store) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	var cp *storage.Checkpoint
	err := s.write(ctx, "take event", func(w *wtx) error {
		now := s.now()
		st, err := w.fenceAt(req.Lease, now)
		if err != nil {
			return err
		}
		cp, err = w.satisfy(st, req.Lease.RunID, req.Wait, now, req.LeaseFor, false, true, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// satisfy resolves the wait wt of the fenced run id at once, if it can:
// the checkpoint of the first of its cases that has one, or else the
// oldest event buffered on any case's topic, consumed and written as its
// case's checkpoint. Then, and only then, progress is published, the
// lease extended by leaseFor (when positive), recoveries reset when
// anything was written (progressed, or the event), a wait still
// registered for one of the cases ended, and the active step cleared
// unless keepActive; it returns the checkpoint, or nil having changed
// nothing.
func (w *wtx) satisfy(st fenceState, id string, wt *storage.Wait, now time.Time, leaseFor time.Duration,
	progressed, keepActive bool, progress []byte) (*storage.Checkpoint, error) {
	n := now.UnixNano()
	var cp *storage.Checkpoint
	var err error
	for _, c := range wt.Cases() {
		if cp, err = w.loadCheckpoint(st.ref, st.execution, c.Key); err != nil {
			return nil, err
		}
		if cp != nil {
			break
		}
	}
	if cp == nil {
		key, found, err := w.takeBuffered(st.ref, st.execution, wt, n)
		if err != nil || !found {
			return nil, err
		}
		if cp, err = w.loadCheckpoint(st.ref, st.execution, key); err != nil {
			return nil, err
		}
		progressed = true
	}
	if err := w.publish(st.ref, progress); err != nil {
		return nil, err
	}
	_, err = w.exec(`UPDATE runs SET lease_until = iif(?6, ?2, lease_until), updated_at = ?3,
			recoveries = iif(?4, 0, recoveries),
			active_key = iif(?7, active_key, NULL), active_attempt = iif(?7, active_attempt, NULL),
			active_started = iif(?7, active_started, NULL),
			wait_topic    = iif(wait_key IN (SELECT value FROM json_each(?5)), NULL, wait_topic),
			wait_kind     = iif(wait_key IN (SELECT value FROM json_each(?5)), NULL, wait_kind),
			wait_deadline = iif(wait_key IN (SELECT value FROM json_each(?5)), NULL, wait_deadline),
			wait_also     = iif(wait_key IN (SELECT value FROM json_each(?5)), NULL, wait_also),
			wait_key      = iif(wait_key IN (SELECT value FROM json_each(?5)), NULL, wait_key)
		WHERE id = ?1`, id, leaseUntil(now, leaseFor), n, progressed, caseKeys(wt), leaseFor > 0, keepActive)
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// Complete finishes a run, fenced, and delivers req.Notify in the same
// change; with req.ChildError it terminates the run's descendants in it
// too, and requests the cancellation of the children that are cancelled
// with their parent, as Terminate does.
func (s *Store) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	return s.write(ctx, "complete", func(w *wtx) error {
		if _, err := w.fenceAt(req.Lease, s.now()); err != nil {
			return err
		}
		return w.complete(req, req.Progress, false, s.now().UnixNano())
	})
}

// complete finishes the fenced run as Complete does, at now, publishing
// progress (nil: leaves it); stepped is set when the run's step was
// written in the same change (a completion that rides with a checkpoint),
// which resets its recoveries, as the checkpoint would.
func (w *wtx) complete(req storage.CompleteRequest, progress []byte, stepped bool, now int64) error {
	if err := w.finish(req.Lease.RunID, req.Status, bytesArg(req.Output), req.Error, progress, stepped, now); err != nil {
		return err
	}
	if _, err := w.terminateChildren(req.Lease.RunID, req.ChildError, req.ChildCancel, now); err != nil {
		return err
	}
	return w.deliverNotify(req.Notify, now)
}

// finish puts a run in a final status, clearing lease, wait, active step
// and suspension, publishes progress (nil: leaves it), and ends its
// execution; stepped resets its recoveries too (see complete).
func (w *wtx) finish(runID string, status storage.RunStatus, output any, e *storage.ErrorInfo, progress []byte, stepped bool, now int64) error {
	var ref, exec int64
	if _, err := w.queryRow(`UPDATE runs SET status = ?2, ended_at = ?3, recoveries = iif(?4, 0, recoveries),
			pause_requested = 0, ready_at = NULL, updated_at = ?3, `+releaseLease("?3")+`, `+clearActive+`, `+clearWait+`
		WHERE id = ?1 RETURNING ref, execution`, func(r row) { ref, exec = r.int64(0), r.int64(1) }, runID, string(status), now, stepped); err != nil {
		return err
	}
	if _, err := w.exec(`UPDATE run_data SET output = ?2, error_message = ?3, error_code = ?4, suspend_state = NULL,
			progress = coalesce(?5, progress)
		WHERE ref = ?1`, ref, output, errMsg(e), errCode(e), bytesArg(progress)); err != nil {
		return err
	}
	_, err := w.exec(`UPDATE executions SET ended_at = ?3, status = ?4, error_message = ?5, error_code = ?6
		WHERE run_ref = ?1 AND number = ?2`, ref, exec, now, string(status), errMsg(e), errCode(e))
	if err == nil {
		w.finished = append(w.finished, runID)
	}
	return err
}

// fenceState is what fenced writes check and branch on.
type fenceState struct {
	ref            int64 // the run's row
	execution      int64 // the run's current execution
	pauseRequested bool
	// cancelRequested is true when the run's cancellation is requested.
	cancelRequested bool
}

// fence checks, inside the writing transaction, that the run is running
// and its token is the lease's: otherwise (an unknown run included) the
// lease is lost.
func (w *wtx) fence(l storage.Lease) (fenceState, error) { return w.fenceAt(l, time.Time{}) }

// fenceAt is fence, and a lost lease says why, judged at now (the zero time:
// not judged).
func (w *wtx) fenceAt(l storage.Lease, now time.Time) (fenceState, error) {
	var st fenceState
	var status string
	var token int64
	var until time.Time
	found, err := w.queryRow(`SELECT status, token, pause_requested, ref, execution, lease_until, cancel_reason IS NOT NULL
		FROM runs WHERE id = ?1`, func(r row) {
		status, token = r.str(0), r.int64(1)
		st.pauseRequested = r.int64(2) != 0
		st.ref, st.execution = r.int64(3), r.int64(4)
		until = r.time(5)
		st.cancelRequested = r.int64(6) != 0
	}, l.RunID)
	if err != nil {
		return st, err
	}
	if !found || status != string(storage.StatusRunning) || token != l.Token {
		if now.IsZero() {
			return st, leaseLost(l)
		}
		return st, storage.LeaseLost("", l, found, storage.RunStatus(status), token, until, now)
	}
	return st, nil
}

// leaseLost is the error of a fenced write whose lease is gone, when the
// write does not judge why.
func leaseLost(l storage.Lease) error {
	return fmt.Errorf("run %q token %d: %w", l.RunID, l.Token, storage.ErrLeaseLost)
}

// extendLease sets the lease of a fenced run to until, and clears its
// active step (a step's write ends it).
func (w *wtx) extendLease(runID string, until, now int64) error {
	_, err := w.exec(`UPDATE runs SET lease_until = ?2, updated_at = ?3, `+clearActive+` WHERE id = ?1`, runID, until, now)
	return err
}

// publish makes progress, unless nil, the run's published progress: one
// statement, made only by a write that publishes.
func (w *wtx) publish(ref int64, progress []byte) error {
	if progress == nil {
		return nil
	}
	_, err := w.exec(`UPDATE run_data SET progress = ?2 WHERE ref = ?1`, ref, progress)
	return err
}

// clearActive is the SQL assignment that clears a run's active step.
const clearActive = `active_key = NULL, active_attempt = NULL, active_started = NULL`

// releaseLease returns the SQL assignment that ends the current lease at
// now, the parameter nowParam; owner and token keep describing it.
func releaseLease(nowParam string) string {
	return `lease_until = iif(lease_until > ` + nowParam + `, ` + nowParam + `, lease_until)`
}

// leaseUntil is now+leaseFor in the stored form.
func leaseUntil(now time.Time, leaseFor time.Duration) int64 {
	return now.Add(leaseFor).UnixNano()
}
