package runtime

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/stemflow/stem/storage"
)

// HistoryFormat names the format of a History file; ReadHistory refuses
// any other.
const HistoryFormat = "stem.history/1"

// History is one execution of a run as it was recorded, in a file a team
// keeps beside its tests: Engine.ExportHistory writes it (`stem export`
// is the operator's way), and the test kit's stemtest.ReplayHistories
// replays it against the current code, so a production history becomes a
// regression test of every later change. Payloads are kept as stored:
// JSON as it is, sealed payloads (a Codec's) as base64, so a history
// exported from a sealed store replays only with the codec's keys.
type History struct {
	// Format is HistoryFormat.
	Format   string `json:"format"`
	RunID    string `json:"run"`
	Workflow string `json:"workflow"`
	// Version is the workflow version the run started under (0: not
	// recorded).
	Version   int `json:"version,omitempty"`
	Execution int `json:"execution"`
	// Status is the run's status when it was exported; Output and Error
	// its outcome when finished.
	Status RunStatus          `json:"status"`
	Input  Payload            `json:"input"`
	Output Payload            `json:"output,omitempty"`
	Error  *storage.ErrorInfo `json:"error,omitempty"`
	// Calls are the execution's checkpoints in the order they were
	// written: what a replay must find the code asking for.
	Calls []HistoryCall `json:"calls"`
	// ExportedAt is when the history was read from its store.
	ExportedAt time.Time `json:"exportedAt"`
}

// HistoryCall is one recorded call of a History: a checkpoint.
type HistoryCall struct {
	Key    string             `json:"key"`
	Kind   StepKind           `json:"kind"`
	Output Payload            `json:"output,omitempty"`
	Error  *storage.ErrorInfo `json:"error,omitempty"`
	// CreatedAt is when it was written.
	CreatedAt time.Time `json:"createdAt"`
}

// Payload is a payload as stored, in a History: it is written as the JSON
// it holds, or, when it is not JSON (sealed by a codec), as
// {"base64": "..."}.
type Payload []byte

// MarshalJSON writes p as its JSON, or as {"base64": ...}; an empty
// payload is null.
func (p Payload) MarshalJSON() ([]byte, error) {
	if len(p) == 0 {
		return []byte("null"), nil
	}
	if json.Valid(p) && !bytes.HasPrefix(bytes.TrimSpace(p), []byte(`{"base64"`)) {
		var b bytes.Buffer
		if err := json.Compact(&b, p); err == nil {
			return b.Bytes(), nil
		}
	}
	return json.Marshal(struct {
		Base64 string `json:"base64"`
	}{base64.StdEncoding.EncodeToString(p)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Payload) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*p = nil
		return nil
	}
	var wrapped struct {
		Base64 *string `json:"base64"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) && json.Unmarshal(b, &wrapped) == nil && wrapped.Base64 != nil {
		raw, err := base64.StdEncoding.DecodeString(*wrapped.Base64)
		if err != nil {
			return fmt.Errorf("a sealed payload's base64: %v", err)
		}
		*p = raw
		return nil
	}
	*p = append((*p)[:0], b...)
	return nil
}

// ExportHistory reads the current execution of run id as a History. It
// only reads; an unknown run is ErrRunNotFound.
func (e *Engine) ExportHistory(ctx context.Context, id string) (*History, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	r, err := e.store.GetRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("export of run %q: %w", id, err)
	}
	steps, err := e.store.ListSteps(ctx, storage.StepsQuery{RunID: id, Execution: r.Execution})
	if err != nil {
		return nil, fmt.Errorf("export of run %q: %w", id, err)
	}
	h := &History{
		Format: HistoryFormat, RunID: r.ID, Workflow: r.Workflow, Version: r.Version, Execution: r.Execution,
		Status: r.Status, Input: r.Input, Output: r.Output, Error: r.Error, Calls: []HistoryCall{},
		ExportedAt: e.clock.Now().UTC(),
	}
	for _, st := range steps.Steps {
		cp := st.Checkpoint
		h.Calls = append(h.Calls, HistoryCall{Key: cp.Key, Kind: cp.Kind, Output: cp.Output, Error: cp.Error, CreatedAt: cp.CreatedAt.UTC()})
	}
	return h, nil
}

// ReadHistory reads a History written by ExportHistory (as JSON), checking
// its format and fields: an error says what is wrong and where.
func ReadHistory(r io.Reader) (*History, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var h History
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: a run history: %v", ErrDecode, err)
	}
	switch {
	case h.Format != HistoryFormat:
		return nil, invalidArg("a run history of format %q; this build reads %q", h.Format, HistoryFormat)
	case h.RunID == "" || h.Workflow == "":
		return nil, invalidArg("a run history without its run ID or workflow")
	case h.Execution < 1:
		return nil, invalidArg("run history %s: execution %d; executions count from 1", h.RunID, h.Execution)
	case !h.Status.Valid():
		return nil, invalidArg("run history %s: unknown status %q", h.RunID, h.Status)
	}
	seen := map[string]bool{}
	for i, c := range h.Calls {
		if c.Key == "" {
			return nil, invalidArg("run history %s: call %d has no key", h.RunID, i)
		}
		if !c.Kind.Valid() {
			return nil, invalidArg("run history %s: call %d (%s): unknown kind %q", h.RunID, i, c.Key, c.Kind)
		}
		if seen[c.Key] {
			return nil, invalidArg("run history %s: call %d: key %q recorded twice", h.RunID, i, c.Key)
		}
		seen[c.Key] = true
	}
	return &h, nil
}
