package pgstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

type scanner interface {
	Scan(dest ...any) error
}

// scanRun reads the runColumns of one row, then extra destinations.
func scanRun(row scanner, extra ...any) (storage.RunRecord, error) {
	var (
		rec          storage.RunRecord
		status       string
		errJSON      []byte
		waitKey      *string
		waitTopic    *string
		waitKind     *string
		waitDeadline *time.Time
		leaseUntil   *time.Time
		policy       string
		execution    int32
		activeKey    *string
		activeNumber *int32
		activeStart  *time.Time
		also         waitCases
		priority     int32
		version      int32
		headers      *string
		hold         *string
		cancel       *string
		attrs        *string
	)
	dest := []any{
		&rec.ID, &rec.Workflow, &rec.ParentID, &status, &rec.Input, &rec.Output, &errJSON,
		&rec.PauseRequested, &rec.ReadyAt, &waitKey, &waitTopic, &waitKind, &waitDeadline,
		&rec.Owner, &leaseUntil, &rec.Token, &rec.Recoveries, &policy, &execution, &rec.StartedAt, &rec.EndedAt,
		&activeKey, &activeNumber, &activeStart, &rec.CreatedAt, &rec.UpdatedAt,
		&also.keys, &also.topics, &also.kinds, &rec.Deadline, &rec.Progress,
		&rec.Queue, &rec.Partition, &priority, &version, &headers, &hold, &cancel, &attrs,
	}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return storage.RunRecord{}, err
	}
	rec.Status = storage.RunStatus(status)
	rec.Priority = int(priority)
	rec.Version = int(version)
	info, err := decodeError(errJSON)
	if err != nil {
		return storage.RunRecord{}, err
	}
	rec.Error = info
	if rec.Headers, err = decodeHeaders(headers); err != nil {
		return storage.RunRecord{}, err
	}
	if rec.Hold, err = decodeHold(hold); err != nil {
		return storage.RunRecord{}, err
	}
	if rec.Attributes, err = decodeAttrs(attrs); err != nil {
		return storage.RunRecord{}, err
	}
	rec.CancelRequested, rec.CancelReason = cancelOf(cancel)
	rec.Wait = makeWait(waitKey, waitTopic, waitKind, waitDeadline, also)
	if leaseUntil != nil {
		rec.LeaseUntil = *leaseUntil
	}
	rec.ParentPolicy = storage.ParentPolicy(policy)
	rec.Execution = int(execution)
	if activeKey != nil {
		rec.Active = &storage.ActiveStep{Key: *activeKey}
		if activeNumber != nil {
			rec.Active.Attempt = int(*activeNumber)
		}
		if activeStart != nil {
			rec.Active.Started = *activeStart
		}
	}
	return rec, nil
}

// cancelOf reads the cancel_reason column: whether a cancellation was
// requested (the column is not NULL), and its reason.
func cancelOf(reason *string) (requested bool, why string) {
	if reason == nil {
		return false, ""
	}
	return true, *reason
}

// makeWait is the wait stored in a run's wait columns, nil when the run
// has none.
func makeWait(key, topic, kind *string, deadline *time.Time, also waitCases) *storage.Wait {
	if topic == nil {
		return nil
	}
	w := &storage.Wait{Topic: *topic, Deadline: deadline, Also: also.cases()}
	if key != nil {
		w.Key = *key
	}
	if kind != nil {
		w.Kind = storage.CheckpointKind(*kind)
	}
	return w
}

// waitCases are a wait's further cases (storage.Wait.Also) as the three
// parallel arrays the runs table keeps them in: NULL, nil here, when the
// wait has none.
type waitCases struct {
	keys, topics, kinds []string
}

// alsoOf is w's further cases as arrays to store.
func alsoOf(w *storage.Wait) waitCases {
	if w == nil || len(w.Also) == 0 {
		return waitCases{}
	}
	c := waitCases{
		keys:   make([]string, len(w.Also)),
		topics: make([]string, len(w.Also)),
		kinds:  make([]string, len(w.Also)),
	}
	for i, a := range w.Also {
		c.keys[i], c.topics[i], c.kinds[i] = a.Key, a.Topic, string(a.Kind)
	}
	return c
}

// cases is the arrays as storage.WaitCase values, nil for none.
func (c waitCases) cases() []storage.WaitCase {
	if len(c.topics) == 0 {
		return nil
	}
	out := make([]storage.WaitCase, len(c.topics))
	for i, t := range c.topics {
		out[i].Topic = t
		if i < len(c.keys) {
			out[i].Key = c.keys[i]
		}
		if i < len(c.kinds) {
			out[i].Kind = storage.CheckpointKind(c.kinds[i])
		}
	}
	return out
}

func encodeError(info *storage.ErrorInfo) ([]byte, error) {
	if info == nil {
		return nil, nil
	}
	b, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("encode error info: %w", err)
	}
	return b, nil
}

func decodeError(b []byte) (*storage.ErrorInfo, error) {
	if b == nil {
		return nil, nil
	}
	var info storage.ErrorInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("decode error info: %w", err)
	}
	return &info, nil
}

// encodeHeaders returns a run's headers as the JSON text the headers
// column holds (an object, its names sorted), or nil for none. A map of
// strings always encodes, and decodes to the same bytes (the values are
// valid UTF-8, as ValidateHeaders checks).
func encodeHeaders(h map[string]string) *string {
	if len(h) == 0 {
		return nil
	}
	b, _ := json.Marshal(h)
	str := string(b)
	return &str
}

// decodeHeaders reads the headers column, nil for NULL or none.
func decodeHeaders(text *string) (map[string]string, error) {
	if text == nil {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(*text), &h); err != nil {
		return nil, fmt.Errorf("decode headers: %w", err)
	}
	if len(h) == 0 {
		return nil, nil
	}
	return h, nil
}

// encodeHold returns a run's hold as the JSON text the hold column holds,
// or nil for none. A hold JSON cannot encode (its Since outside the years
// 0 to 9999) is storage.ErrInvalidArgument.
func encodeHold(h *storage.Hold) (*string, error) {
	if h == nil {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("hold: %w: %v", storage.ErrInvalidArgument, err)
	}
	str := string(b)
	return &str, nil
}

// decodeHold reads the hold column, nil for NULL.
func decodeHold(text *string) (*storage.Hold, error) {
	if text == nil {
		return nil, nil
	}
	var h storage.Hold
	if err := json.Unmarshal([]byte(*text), &h); err != nil {
		return nil, fmt.Errorf("decode hold: %w", err)
	}
	return &h, nil
}

// scanCheckpoint reads the ckptColumns: key, kind, output, error, seq,
// created_at, execution, forked_from, input.
func scanCheckpoint(row scanner) (storage.Checkpoint, error) {
	var (
		c                     storage.Checkpoint
		kind                  string
		errJSON               []byte
		execution, forkedFrom int32
	)
	if err := row.Scan(&c.Key, &kind, &c.Output, &errJSON, &c.Seq, &c.CreatedAt, &execution, &forkedFrom, &c.Input); err != nil {
		return storage.Checkpoint{}, err
	}
	c.Execution, c.ForkedFrom = int(execution), int(forkedFrom)
	c.Kind = storage.CheckpointKind(kind)
	info, err := decodeError(errJSON)
	if err != nil {
		return storage.Checkpoint{}, err
	}
	c.Error = info
	return c, nil
}

// attemptArrays turns attempts into the parallel arrays the statements
// unnest.
func attemptArrays(as []storage.Attempt) []any {
	keys := make([]string, len(as))
	numbers := make([]int32, len(as))
	started := make([]time.Time, len(as))
	ended := make([]time.Time, len(as))
	errs := make([]string, len(as))
	retryAt := make([]*time.Time, len(as))
	for i, a := range as {
		keys[i], numbers[i], started[i], ended[i], errs[i], retryAt[i] = a.Key, int32(a.Number), a.Started, a.Ended, a.Error, a.RetryAt
	}
	return []any{keys, numbers, started, ended, errs, retryAt}
}

// attemptJSON is an attempt as stored in a checkpoint row.
type attemptJSON struct {
	Key     string     `json:"k"`
	Number  int        `json:"n"`
	Started time.Time  `json:"s"`
	Ended   time.Time  `json:"e"`
	Error   string     `json:"err,omitempty"`
	RetryAt *time.Time `json:"r,omitempty"`
}

// encodeAttempts returns the attempts as JSON text, or nil for none.
func encodeAttempts(as []storage.Attempt) (*string, error) {
	if len(as) == 0 {
		return nil, nil
	}
	js := make([]attemptJSON, len(as))
	for i, a := range as {
		js[i] = attemptJSON{Key: a.Key, Number: a.Number, Started: a.Started, Ended: a.Ended, Error: a.Error, RetryAt: a.RetryAt}
	}
	b, err := json.Marshal(js)
	if err != nil {
		return nil, fmt.Errorf("encode attempts: %w", err)
	}
	str := string(b)
	return &str, nil
}

// decodeAttempts reads the attempts of a checkpoint row, stamped with the
// checkpoint's execution.
func decodeAttempts(b []byte, execution int) ([]storage.Attempt, error) {
	if b == nil {
		return nil, nil
	}
	var js []attemptJSON
	if err := json.Unmarshal(b, &js); err != nil {
		return nil, fmt.Errorf("decode attempts: %w", err)
	}
	as := make([]storage.Attempt, len(js))
	for i, a := range js {
		as[i] = storage.Attempt{Key: a.Key, Number: a.Number, Started: a.Started, Ended: a.Ended, Error: a.Error,
			RetryAt: a.RetryAt, Execution: execution}
	}
	return as, nil
}
