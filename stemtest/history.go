package stemtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// ReplayHistories replays each run history file matching pattern (a
// filepath.Glob pattern, such as "testdata/histories/*.json"), written by
// Engine.ExportHistory or `stem export`, against the workflows register
// registers, as a subtest named after the file. A subtest fails when the
// code would not continue the run as it was recorded: it calls what the
// run did not record, or skips or reorders what it did, a recorded result
// no longer decodes into the code's type, or a finished run now ends
// otherwise; the failure says which, and where. Nothing runs a step: every
// call is answered from the history. A pattern that matches no file fails
// the test, so a moved folder is not a silent pass.
//
// Keep production histories as files beside the tests, and every change to
// a workflow is checked against the runs it must continue. WithConfig
// sets the engine's configuration (a Codec, for histories of a sealed
// store); the kit's other options do not apply.
func ReplayHistories(t *testing.T, register func(e *runtime.Engine) error, pattern string, opts ...Option) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatalf("stemtest: run histories %q: %v", pattern, err)
	}
	if len(files) == 0 {
		t.Fatalf("stemtest: no run history matches %q", pattern)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			if err := replayHistoryFile(t.Context(), register, file, o); err != nil {
				t.Error(err)
			}
		})
	}
}

// replayHistoryFile replays the history in file on a fresh store; the
// error says why the code would not continue it.
func replayHistoryFile(ctx context.Context, register func(e *runtime.Engine) error, file string, o options) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("stemtest: %v", err)
	}
	defer f.Close()
	h, err := runtime.ReadHistory(f)
	if err != nil {
		return fmt.Errorf("stemtest: %s: %w", file, err)
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	if err := loadHistory(ctx, store, h); err != nil {
		return fmt.Errorf("stemtest: %s: loading run %s: %w", file, h.RunID, err)
	}
	cfg := runtime.Config{Store: store}
	if o.config != nil {
		o.config(&cfg)
		cfg.Store = store
	}
	e, err := runtime.New(cfg)
	if err != nil {
		return fmt.Errorf("stemtest: %s: %w", file, err)
	}
	defer e.Close()
	if err := register(e); err != nil {
		return fmt.Errorf("stemtest: %s: registering the workflows: %w", file, err)
	}
	rep, err := e.Replay(ctx, runtime.ReplayOptions{Workflows: []string{h.Workflow}, RunIDs: []string{h.RunID}})
	if err != nil {
		return fmt.Errorf("stemtest: %s: replaying run %s of %s: %w", file, h.RunID, h.Workflow, err)
	}
	for _, s := range rep.Skipped {
		return fmt.Errorf("stemtest: %s: run %s could not be opened: %s", file, s.RunID, s.Reason)
	}
	for _, d := range rep.Divergences {
		return fmt.Errorf("stemtest: %s: the code would not continue the run as recorded: %s", file, d)
	}
	return nil
}

// loadHistory writes h into store as its run, claimed once and left as it
// was exported: its calls checkpointed in order, then finished with its
// outcome, or parked.
func loadHistory(ctx context.Context, store storage.Store, h *runtime.History) error {
	if _, err := store.CreateRuns(ctx, []storage.NewRun{{ID: h.RunID, Workflow: h.Workflow, Input: h.Input, Version: h.Version}}); err != nil {
		return err
	}
	claimed, err := store.Claim(ctx, storage.ClaimRequest{Owner: "stemtest-history", Workflows: []string{h.Workflow}, Limit: 1, LeaseFor: time.Hour})
	if err != nil {
		return err
	}
	if len(claimed) != 1 {
		return fmt.Errorf("claimed %d runs, want 1", len(claimed))
	}
	lease := claimed[0].Lease
	for _, c := range h.Calls {
		_, err := store.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Hour,
			Checkpoint: storage.Checkpoint{Key: c.Key, Kind: c.Kind, Output: c.Output, Error: c.Error}})
		if err != nil {
			return fmt.Errorf("call %s: %w", c.Key, err)
		}
	}
	switch h.Status {
	case runtime.StatusComplete, runtime.StatusErrored:
		return store.Complete(ctx, storage.CompleteRequest{Lease: lease, Status: h.Status, Output: h.Output, Error: h.Error})
	}
	later := time.Now().Add(24 * time.Hour)
	_, err = store.Suspend(ctx, storage.SuspendRequest{Lease: lease, LeaseFor: time.Hour, ReadyAt: &later})
	return err
}
