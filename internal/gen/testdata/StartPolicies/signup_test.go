package signup_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	signup "example.com/stemcase"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// recorder is the in-memory store recording the runs each create asks
// for, and refusing, as a policy would, the IDs in refuse. (The in-memory
// store of this tree does not judge start policies or signal-with-start
// yet: the test checks what generated code asks of the store.)
type recorder struct {
	*memstore.Store
	mu     sync.Mutex
	runs   []storage.NewRun
	refuse map[string]bool
}

func (r *recorder) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	r.mu.Lock()
	r.runs = append(r.runs, runs...)
	r.mu.Unlock()
	var pass []storage.NewRun
	for _, nr := range runs {
		if !r.refuse[nr.ID] {
			pass = append(pass, nr)
		}
	}
	created, err := r.Store.CreateRuns(ctx, pass)
	if err != nil {
		return nil, err
	}
	out := make([]storage.CreateResult, len(runs))
	for i, nr := range runs {
		if r.refuse[nr.ID] {
			out[i] = storage.CreateResult{Run: storage.RunRecord{ID: nr.ID, Workflow: nr.Workflow, Status: storage.StatusRunning}, Refused: storage.RefusedExists}
			continue
		}
		out[i], created = created[0], created[1:]
	}
	return out, nil
}

func (r *recorder) last(t *testing.T) storage.NewRun {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.runs) == 0 {
		t.Fatal("no run created")
	}
	return r.runs[len(r.runs)-1]
}

func setup(t *testing.T) (*runtime.Engine, *recorder) {
	t.Helper()
	st := &recorder{Store: memstore.New(memstore.Options{}), refuse: map[string]bool{"taken": true}}
	e, err := runtime.New(runtime.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := signup.RegisterWorkflows(e); err != nil {
		t.Fatal(err)
	}
	return e, st
}

var user = signup.User{ID: "u-1", Email: "u@example.com"}

// TestPolicies checks that each workflow's starts carry its existing= and
// ended=, and that a start's own IfExists overrides them.
func TestPolicies(t *testing.T) {
	ctx := context.Background()
	e, st := setup(t)
	check := func(what string, existing storage.ExistingPolicy, ended storage.EndedPolicy) {
		t.Helper()
		r := st.last(t)
		if r.OnExisting != existing || r.OnEnded != ended {
			t.Errorf("%s: policies %q and %q, want %q and %q", what, r.OnExisting, r.OnEnded, existing, ended)
		}
	}
	if _, err := signup.StartOnboard(ctx, e, user, runtime.WithID("a")); err != nil {
		t.Fatal(err)
	}
	check("StartOnboard", runtime.ExistingFail, runtime.EndedReuse)
	if _, err := signup.StartOnboard(ctx, e, user, runtime.WithID("b"), runtime.IfExists(runtime.ExistingReplace)); err != nil {
		t.Fatal(err)
	}
	check("StartOnboard with IfExists", runtime.ExistingReplace, runtime.EndedReuse)
	if _, err := signup.StartRemind(ctx, e, user); err != nil {
		t.Fatal(err)
	}
	check("StartRemind", runtime.ExistingReturn, runtime.EndedReject)
	if _, err := signup.StartWelcome(ctx, e, user); err != nil {
		t.Fatal(err)
	}
	check("StartWelcome", runtime.ExistingReturn, runtime.EndedReturn)
	if _, err := signup.StartReplace(ctx, e, user); err != nil {
		t.Fatal(err)
	}
	check("StartReplace", runtime.ExistingReplace, runtime.EndedReturn)
}

// TestSendOrStart checks that Send<Event>OrStart<Workflow> creates the run
// with the event, under the workflow's policies, and hands back its run.
func TestSendOrStart(t *testing.T) {
	ctx := context.Background()
	e, st := setup(t)
	run, err := signup.SendConfirmedOrStartOnboard(ctx, e, user.ID, user, signup.Confirmed{Code: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	if run.ID() != user.ID {
		t.Errorf("run ID %q, want %q", run.ID(), user.ID)
	}
	r := st.last(t)
	var in signup.User
	if err := json.Unmarshal(r.Input, &in); err != nil || in != user {
		t.Errorf("input %s, %v", r.Input, err)
	}
	if r.ID != user.ID || r.Event == nil || r.Event.Topic != signup.ConfirmedTopic || !strings.Contains(string(r.Event.Payload), `"c-1"`) {
		t.Errorf("created %+v, want run %s with event %s", r, user.ID, signup.ConfirmedTopic)
	}
	if r.OnExisting != runtime.ExistingFail || r.OnEnded != runtime.EndedReuse {
		t.Errorf("policies %q and %q", r.OnExisting, r.OnEnded)
	}
	if _, err := signup.SendConfirmedOrStartOnboard(ctx, e, "taken", user, signup.Confirmed{}); !errors.Is(err, runtime.ErrStartRefused) {
		t.Errorf("refused SendOrStart: %v, want runtime.ErrStartRefused", err)
	}
	if err := signup.ConfirmLink(ctx, e, signup.User{ID: "u-2"}, "c-2"); err != nil {
		t.Error(err)
	}
}

// TestBatchRefused checks that a batch keeps the handles of the runs it
// started when a policy refuses others.
func TestBatchRefused(t *testing.T) {
	ctx := context.Background()
	e, _ := setup(t)
	runs, err := signup.StartOnboardBatch(ctx, e, []runtime.BatchItem[signup.User]{{ID: "x", Input: user}, {ID: "taken", Input: user}, {ID: "y", Input: user}})
	if !errors.Is(err, runtime.ErrStartRefused) {
		t.Fatalf("batch: %v, want runtime.ErrStartRefused", err)
	}
	if len(runs) != 3 || runs[0] == nil || runs[0].ID() != "x" || runs[1] != nil || runs[2] == nil || runs[2].ID() != "y" {
		t.Errorf("batch runs %v", runs)
	}
}

// TestTxRefusedOnMemstore checks that the Tx forms fail on a store
// without transactions, with the runtime's error.
func TestTxRefusedOnMemstore(t *testing.T) {
	ctx := context.Background()
	e, st := setup(t)
	n := len(st.runs)
	var tx struct{} // not a transaction of any store
	_, err := signup.StartOnboardTx(ctx, e, tx, user)
	errs := []error{err}
	errs = append(errs, signup.SendConfirmedTx(ctx, e, tx, user.ID, signup.Confirmed{}))
	_, err = signup.EmitConfirmedTx(ctx, e, tx, signup.Confirmed{})
	errs = append(errs, err)
	for i, err := range errs {
		if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "*signup_test.recorder") {
			t.Errorf("call %d: %v, want runtime.ErrInvalidArgument naming the store", i, err)
		}
	}
	if len(st.runs) != n || slices.ContainsFunc(st.runs, func(r storage.NewRun) bool { return r.Input == nil }) {
		t.Errorf("a refused Tx call created a run")
	}
}
