package storage_test

import (
	"errors"
	"testing"

	"github.com/stemflow/stem/storage"
)

func TestPageSize(t *testing.T) {
	for limit, want := range map[int]int{0: storage.DefaultPageSize, -3: storage.DefaultPageSize, 1: 1, 500: 500} {
		if got := (storage.ListRunsQuery{Limit: limit}).PageSize(); got != want {
			t.Errorf("PageSize with Limit %d = %d, want %d", limit, got, want)
		}
	}
}

func TestDeliveryKind(t *testing.T) {
	var none *storage.Wait
	for _, c := range []struct {
		w    *storage.Wait
		want storage.CheckpointKind
	}{
		{none, storage.KindEvent},
		{&storage.Wait{}, storage.KindEvent},
		{&storage.Wait{Kind: storage.KindChild}, storage.KindChild},
	} {
		if got := c.w.DeliveryKind(); got != c.want {
			t.Errorf("%+v.DeliveryKind() = %q, want %q", c.w, got, c.want)
		}
	}
}

func TestValidateAcceptsWellFormedRequests(t *testing.T) {
	l := storage.Lease{RunID: "r", Owner: "w", Token: 1}
	cp := storage.Checkpoint{Key: "s@v1", Kind: storage.KindStep}
	for name, err := range map[string]error{
		"new runs":   storage.ValidateNewRuns([]storage.NewRun{{ID: "r", Workflow: "wf"}}),
		"list":       storage.ListRunsQuery{Status: storage.StatusWaiting}.Validate(),
		"claim":      storage.ClaimRequest{Owner: "w", LeaseFor: 1}.Validate(),
		"checkpoint": storage.CheckpointRequest{Lease: l, LeaseFor: 1, Checkpoint: cp}.Validate(),
		"attempts":   storage.RecordAttemptsRequest{Lease: l, LeaseFor: 1}.Validate(),
		"heartbeat":  storage.HeartbeatRequest{Lease: l, LeaseFor: 1}.Validate(),
		"suspend":    storage.SuspendRequest{Lease: l, Wait: &storage.Wait{Key: "k", Topic: "t"}}.Validate(),
		"complete":   storage.CompleteRequest{Lease: l, Status: storage.StatusErrored}.Validate(),
		"terminate":  storage.TerminateRequest{RunID: "r"}.Validate(),
		"emit":       storage.EmitRequest{Topic: "t"}.Validate(),
		"event":      storage.Event{RunID: "r", Topic: "t"}.Validate(),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidateWording(t *testing.T) {
	err := storage.ClaimRequest{LeaseFor: 1}.Validate()
	if !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("err = %v, want ErrInvalidArgument", err)
	}
	if want := "claim: stem: invalid argument: empty owner"; err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
}
