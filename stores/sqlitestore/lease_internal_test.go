package sqlitestore

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// A claim brings the replay of a run with a short history, equal to
// LoadReplay's, and none for a history past claimReplayBudget, whose
// worker then calls LoadReplay.
func TestClaimBringsShortReplays(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	claim := func() storage.ClaimedRun {
		t.Helper()
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Hour})
		if err != nil || len(got) != 1 {
			t.Fatalf("Claim = %v, %v; want one run", got, err)
		}
		return got[0]
	}
	for _, c := range []struct {
		id      string
		outputs int // checkpoints of 16 KiB each
		brought bool
	}{
		{"short", 2, true},
		{"long", claimReplayBudget/(16<<10) + 1, false},
	} {
		if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: c.id, Workflow: "wf"}}); err != nil {
			t.Fatal(err)
		}
		cl := claim()
		if cl.Replay == nil || cl.Replay.Execution != 1 || len(cl.Replay.Checkpoints) != 0 {
			t.Fatalf("%s: first claim brought replay %+v, want execution 1 without checkpoints", c.id, cl.Replay)
		}
		output := bytes.Repeat([]byte("x"), 16<<10)
		for i := range c.outputs {
			if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Hour,
				Checkpoint: storage.Checkpoint{Key: fmt.Sprintf("s%d@v1", i), Kind: storage.KindStep, Output: output}}); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Now()
		if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: cl.Lease, ReadyAt: &now}); err != nil {
			t.Fatal(err)
		}
		again := claim()
		want, err := s.LoadReplay(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !c.brought && again.Replay != nil:
			t.Errorf("%s: the claim brought a replay of %d checkpoints, past the budget", c.id, len(again.Replay.Checkpoints))
		case c.brought && again.Replay == nil:
			t.Errorf("%s: the claim brought no replay", c.id)
		case c.brought && !reflect.DeepEqual(*again.Replay, want):
			t.Errorf("%s: the claim brought %+v, want LoadReplay's %+v", c.id, *again.Replay, want)
		}
		if len(want.Checkpoints) != c.outputs {
			t.Fatalf("%s: LoadReplay has %d checkpoints, want %d", c.id, len(want.Checkpoints), c.outputs)
		}
		if err := s.Complete(ctx, storage.CompleteRequest{Lease: again.Lease, Status: storage.StatusComplete}); err != nil {
			t.Fatal(err)
		}
	}
}
