package storetest

import (
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// An autoversion step's calls have keys key#0, key#1, ... in call order
// (runtime.IterationKey formats them); to a store they are keys like any
// other. A store that matches keys by prefix mixes #1 with #10, and one that
// orders or forks by key puts #10 before #2: these cases catch both.
var autoversionCases = []testCase{
	{"autoversion/each iteration's key is written once, apart from the others", testIterationsWriteOnce},
	{"autoversion/pending attempts belong to their own iteration", testIterationAttempts},
	{"autoversion/restart from an iteration keeps the earlier iterations only", testForkIteration},
}

// iter is the key of iteration i of the autoversion step pack@v1.
func iter(i int) string { return fmt.Sprintf("pack@v1#%d", i) }

func testIterationsWriteOnce(f *fixture) {
	a := f.start("run-1", "")
	// #10 and #11 first: #1 is a prefix of both and must still be new.
	f.checkpoint(a.Lease, iter(10), "ten")
	f.checkpoint(a.Lease, iter(11), "eleven")
	if res := f.checkpoint(a.Lease, iter(1), "one"); res.Existing != nil {
		f.t.Fatalf("Checkpoint(%s) after %s = existing %+v, want written", iter(1), iter(10), res.Existing)
	}
	for _, c := range []struct{ key, stored string }{{iter(1), "one"}, {iter(10), "ten"}, {iter(11), "eleven"}} {
		res := f.checkpoint(a.Lease, c.key, "again")
		if res.Existing == nil || res.Existing.Key != c.key || string(res.Existing.Output) != c.stored {
			f.t.Fatalf("rewrite of %s = %+v, want existing %s=%s", c.key, res.Existing, c.key, c.stored)
		}
	}
	f.wantCheckpoints("run-1", iter(10)+"=ten", iter(11)+"=eleven", iter(1)+"=one")
}

func testIterationAttempts(f *fixture) {
	a := f.start("run-1", "")
	at := func(sec int) time.Time { return Start.Add(time.Duration(sec) * time.Second) }
	one := storage.Attempt{Key: iter(1), Number: 1, Started: at(0), Ended: at(1), Error: "one failed", RetryAt: timePtr(at(2))}
	ten := storage.Attempt{Key: iter(10), Number: 1, Started: at(0), Ended: at(1), Error: "ten failed", RetryAt: timePtr(at(3))}
	if err := f.store.RecordAttempts(f.ctx, storage.RecordAttemptsRequest{Lease: a.Lease, LeaseFor: lease, Attempts: []storage.Attempt{one, ten}}); err != nil {
		f.t.Fatalf("RecordAttempts: %v", err)
	}
	// Iteration 1 succeeds at its second attempt: its attempts move to its
	// step, and iteration 10's stays pending.
	one2 := storage.Attempt{Key: iter(1), Number: 2, Started: at(2), Ended: at(2)}
	if _, err := f.store.Checkpoint(f.ctx, storage.CheckpointRequest{
		Lease: a.Lease, LeaseFor: lease,
		Checkpoint: storage.Checkpoint{Key: iter(1), Kind: storage.KindStep, Output: []byte("one")},
		Attempts:   []storage.Attempt{one2},
	}); err != nil {
		f.t.Fatalf("Checkpoint(%s): %v", iter(1), err)
	}
	for _, att := range []*storage.Attempt{&one, &one2, &ten} {
		att.Execution = 1
	}
	// A hand-over sees the same.
	f.clock.Advance(lease + time.Millisecond)
	f.claimOne("worker-b")
	f.wantAttempts("LoadReplay Pending", f.replay("run-1").Pending, []storage.Attempt{ten})
	h := f.history("run-1", 0)
	f.wantAttempts("ListSteps Pending", h.Pending, []storage.Attempt{ten})
	if len(h.Steps) != 1 || h.Steps[0].Key != iter(1) {
		f.t.Fatalf("ListSteps = %+v, want %s only", h.Steps, iter(1))
	}
	f.wantAttempts("attempts of "+iter(1), h.Steps[0].Attempts, []storage.Attempt{one, one2})
}

func testForkIteration(f *fixture) {
	a := f.start("run-1", "")
	var all []string
	for i := range 12 {
		f.checkpoint(a.Lease, iter(i), fmt.Sprint(i))
		all = append(all, fmt.Sprintf("%s=%d", iter(i), i))
	}
	f.complete(a.Lease, "done")

	// By key, #10 and #11 sort before #2; by execution order they follow it.
	f.restart("run-1", iter(2))
	f.wantCheckpoints("run-1", all[:2]...)

	// In the new execution the loop runs again from #2, then forks at #10.
	b := f.claimOne("worker-b")
	for i := 2; i < 12; i++ {
		f.checkpoint(b.Lease, iter(i), fmt.Sprint(i))
	}
	f.complete(b.Lease, "done")
	f.restart("run-1", iter(10))
	f.wantCheckpoints("run-1", all[:10]...)
	if rec := f.get("run-1"); rec.Execution != 3 {
		f.t.Fatalf("Execution = %d, want 3", rec.Execution)
	}
}
