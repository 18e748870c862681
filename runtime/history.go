package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// StepStatus is where a step of a run stands.
type StepStatus string

// The step statuses.
const (
	// StepRunning: an attempt is running now (reported by its worker once
	// it has run for a second).
	StepRunning StepStatus = "running"
	// StepRetrying: an attempt failed and the next is due at NextAttemptAt.
	StepRetrying StepStatus = "retrying"
	// StepWaiting: the run waits for the event of this wait; refused
	// payloads show as failed attempts.
	StepWaiting StepStatus = "waiting"
	// StepComplete: the step's result is checkpointed.
	StepComplete StepStatus = "complete"
	// StepFailed: the step's failure is checkpointed (its retries ran out,
	// or it failed permanently).
	StepFailed StepStatus = "failed"
	// StepInterrupted: the step had failed attempts but no result when its
	// execution ended (a restart replaced it, or the run was terminated).
	StepInterrupted StepStatus = "interrupted"
)

// StepInfo is one step of a run as operators see it.
type StepInfo struct {
	// Key is the expanded checkpoint key ("pack@v1#10").
	Key    string
	Kind   StepKind
	Status StepStatus
	// Seq orders the run's checkpoints; 0 for a step without one yet.
	Seq int64
	// Execution is the execution the step belongs to; ForkedFrom, when not
	// 0, the earlier execution its checkpoint was carried over from by a
	// restart from a later step.
	Execution  int
	ForkedFrom int
	// Output is the step's JSON result.
	Output json.RawMessage
	// Input is what the step was given (StepOptions.Input) as JSON, when
	// its checkpoint recorded it; nil for a step without a checkpoint
	// yet, one whose call recorded none, and other kinds of step.
	Input json.RawMessage
	// InputNote says why a step's input was not recorded (it did not
	// encode, or was over the payload limit); "" otherwise.
	InputNote string
	// Err is the step's final error, if it failed (a *SealedError when its
	// text cannot be opened).
	Err error
	// OpenErr, when not nil, says why the step's output, input, error or
	// an attempt's error could not be opened with this engine's codec: a
	// *SealedError, matching ErrSealed, naming the run and the key ID it
	// needs. What could not be opened is left out (an attempt's error text
	// says why instead).
	OpenErr error
	// CreatedAt is when its checkpoint was written.
	CreatedAt time.Time
	// Attempt and Started describe the attempt of a running step.
	Attempt int
	Started time.Time
	// NextAttemptAt is when a retrying step's next attempt is due.
	NextAttemptAt *time.Time
	Attempts      []Attempt
}

// ExecutionInfo is one execution of a run: its start, or a restart.
type ExecutionInfo struct {
	Number    int
	StartedAt time.Time
	// EndedAt is when it finished or a restart replaced it; nil while the
	// current execution runs.
	EndedAt *time.Time
	// Status is the run's status when the execution ended, or now.
	Status RunStatus
	// Err is the error it ended with, if any.
	Err error
	// ForkedFrom and FromStep say where a restart from a step began: the
	// execution before and the step whose checkpoint and later ones were
	// not carried over. FromStep is "" for a start or a restart from the
	// top.
	ForkedFrom int
	FromStep   string
}

// ListExecutions returns a run's executions, oldest first.
func (e *Engine) ListExecutions(ctx context.Context, runID string) ([]ExecutionInfo, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	xs, err := e.store.ListExecutions(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]ExecutionInfo, len(xs))
	for i, x := range xs {
		out[i] = ExecutionInfo{
			Number: x.Number, StartedAt: x.StartedAt, EndedAt: x.EndedAt, Status: x.Status,
			Err:        e.payloads.errorOf(fmt.Sprintf("error text of execution %d of run %s", x.Number, runID), "", x.Error),
			ForkedFrom: x.ForkedFrom, FromStep: x.FromKey,
		}
	}
	return out, nil
}

// ListSteps returns the steps of one execution of a run (0: the current
// one) in execution order, each with its attempts: the checkpointed ones
// first, then those still running, retrying or waiting.
func (e *Engine) ListSteps(ctx context.Context, runID string, execution int) ([]StepInfo, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	h, err := e.store.ListSteps(ctx, storage.StepsQuery{RunID: runID, Execution: execution})
	if err != nil {
		return nil, err
	}
	// The run's record says whether h is the current execution, and so
	// whether its active step and wait belong in the list, however the
	// execution was asked for (0, or its number).
	r, err := e.store.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	var run *storage.RunRecord
	if r.Execution == h.Execution {
		run = &r
	}
	out := make([]StepInfo, 0, len(h.Steps)+1)
	for _, s := range h.Steps {
		info := StepInfo{
			Key: s.Key, Kind: s.Kind, Status: StepComplete, Seq: s.Seq, Execution: s.Execution, ForkedFrom: s.ForkedFrom,
			CreatedAt: s.CreatedAt,
		}
		// An opened checkpoint holds plain JSON and text.
		cp, err := e.payloads.openCheckpoint(runID, s.Checkpoint)
		switch {
		case err != nil:
			info.OpenErr = err
			if failed(s.Checkpoint) {
				info.Err = err
			}
		case cp.Kind == KindChild:
			info.Output, info.Err = e.payloads.childStep(cp)
		default:
			info.Output, info.Err = cp.Output, e.payloads.errorFrom(cp.Key, cp.Error)
		}
		if len(s.Input) > 0 {
			info.Input, info.InputNote, err = e.payloads.stepInputOf(runID, s.Key, s.Input)
			if info.OpenErr == nil {
				info.OpenErr = err
			}
		}
		info.Attempts, err = e.payloads.openAttempts(runID, s.Attempts)
		if info.OpenErr == nil {
			info.OpenErr = err
		}
		if info.Err != nil {
			info.Status = StepFailed
		}
		out = append(out, info)
	}
	return append(out, e.inFlight(runID, h, run)...), nil
}

// inFlight lists the steps of an execution that have no checkpoint: those
// with recorded attempts, in the order of their first, then the step the
// run's worker reports running and the wait it is parked on. run is the
// run's record when h is its current execution, else nil.
func (e *Engine) inFlight(runID string, h storage.History, run *storage.RunRecord) []StepInfo {
	var out []StepInfo
	at := map[string]int{}
	for _, a := range h.Pending {
		i, ok := at[a.Key]
		if !ok {
			i = len(out)
			at[a.Key] = i
			out = append(out, StepInfo{Key: a.Key, Kind: KindStep, Status: StepInterrupted, Execution: h.Execution})
		}
		opened, err := e.payloads.openAttempts(runID, []Attempt{a})
		if out[i].OpenErr == nil {
			out[i].OpenErr = err
		}
		out[i].Attempts = append(out[i].Attempts, opened...)
		out[i].NextAttemptAt = a.RetryAt
	}
	if run == nil || run.Status.Finished() {
		for i := range out {
			out[i].NextAttemptAt = nil
		}
		return out
	}
	for i := range out {
		out[i].Status = StepRetrying
	}
	if a := run.Active; a != nil {
		i, ok := at[a.Key]
		if !ok {
			i = len(out)
			at[a.Key] = i
			out = append(out, StepInfo{Key: a.Key, Kind: KindStep, Execution: h.Execution})
		}
		out[i].Status, out[i].Attempt, out[i].Started, out[i].NextAttemptAt = StepRunning, a.Attempt, a.Started, nil
	}
	if w := run.Wait; w != nil {
		i, ok := at[w.Key]
		if !ok {
			i = len(out)
			out = append(out, StepInfo{Key: w.Key, Execution: h.Execution})
		}
		out[i].Kind, out[i].Status, out[i].NextAttemptAt = w.DeliveryKind(), StepWaiting, nil
	}
	return out
}

// stepInputOf opens the input a step's checkpoint recorded (see
// execution.stepInput): its JSON, or the note that says why it was not
// recorded. What cannot be opened is a *SealedError.
func (p payloads) stepInputOf(runID, key string, stored []byte) (json.RawMessage, string, error) {
	what := fmt.Sprintf("input of checkpoint %s of run %s", key, runID)
	if note, ok := inputNote(stored); ok {
		text, err := p.openText("note on the "+what, note)
		if err != nil {
			return nil, "", err
		}
		return nil, text, nil
	}
	plain, err := p.raw(what, stored)
	if err != nil {
		return nil, "", err
	}
	return plain, "", nil
}
