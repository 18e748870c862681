package memstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/internal/benchwork"
	"github.com/stemflow/stem/stores/memstore"
)

// BenchmarkRun measures one short run's store traffic: create, claim,
// three checkpoints, a reload of them, complete.
func BenchmarkRun(b *testing.B) {
	ctx := b.Context()
	s := memstore.New(memstore.Options{})
	defer s.Close()
	out := []byte(`{"ok":true}`)
	keys := []string{"a@v1", "b@v1", "c@v1"}
	claim := storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("run-%09d", i)
		i++
		if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "wf", Input: out}}); err != nil {
			b.Fatal(err)
		}
		got, err := s.Claim(ctx, claim)
		if err != nil || len(got) != 1 {
			b.Fatal(err, len(got))
		}
		l := got[0].Lease
		for _, k := range keys {
			if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute, Checkpoint: storage.Checkpoint{Key: k, Kind: storage.KindStep, Output: out}}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.LoadReplay(ctx, id); err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(ctx, storage.CompleteRequest{Lease: l, Status: storage.StatusComplete, Output: out}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpoint measures one checkpoint write of a long run.
func BenchmarkCheckpoint(b *testing.B) {
	ctx := b.Context()
	s := memstore.New(memstore.Options{})
	defer s.Close()
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf"}}); err != nil {
		b.Fatal(err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 {
		b.Fatal(err)
	}
	keys := make([]string, b.N+1)
	for i := range keys {
		keys[i] = fmt.Sprintf("pack@v1#%d", i)
	}
	out := []byte(`{"ok":true}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: got[0].Lease, LeaseFor: time.Minute, Checkpoint: storage.Checkpoint{Key: keys[i], Kind: storage.KindStep, Output: out}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParallelSteps times one run of ten 20 ms step futures awaited
// together (p50 and p99 in ms).
//
//	go test -run '^$' -bench 'BenchmarkParallelSteps' ./stores/memstore
func BenchmarkParallelSteps(b *testing.B) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	benchwork.ParallelSteps(b, s)
}

// BenchmarkContinueAsNew times a 10 000-iteration continue-as-new loop:
// the mean iteration around the 100th and the last, in ms.
//
//	go test -run '^$' -bench 'BenchmarkContinueAsNew' -benchtime 1x ./stores/memstore
func BenchmarkContinueAsNew(b *testing.B) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	benchwork.ContinueLoop(b, s, 10000)
}

// BenchmarkInteract measures an update's round trip and a stream value's
// append-to-read latency beside the store's own write (a pause or resume),
// in one run: p50 and p99 in ms, and p50 over the write's.
//
//	go test -run '^$' -bench BenchmarkInteract -benchtime 1000x ./stores/memstore
func BenchmarkInteract(b *testing.B) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	benchwork.Interact(b, s, s)
}
