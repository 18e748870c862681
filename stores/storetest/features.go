package storetest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// needs names the cases that need a feature a store may lack (see
// storage.Partial). A store that lacks one runs that feature's case of
// featureCases instead of them: what it does instead is checked, not
// skipped.
var needs = map[string]storage.Feature{
	"queues/stats say how long the oldest ready run has been ready, on the store's clock":           storage.FeatureGlobalOrder,
	"start/key singleton joins its unfinished holder":                                               storage.FeatureStartKeys,
	"start/key a replaced holder no longer holds its key":                                           storage.FeatureStartKeys,
	"start/key concurrent singleton creates make one run":                                           storage.FeatureStartKeys,
	"start/key debounce joins the window and takes the last input":                                  storage.FeatureStartKeys,
	"start/key debounce with keep first keeps the first input":                                      storage.FeatureStartKeys,
	"start/key is per workflow":                                                                     storage.FeatureStartKeys,
	"attributes/a debounce join takes the last start's":                                             storage.FeatureStartKeys,
	"catalog/queues and a workflow's queue and retention round-trip, sorted":                        storage.FeatureQueueLimits,
	"catalog/a later put replaces a queue by name and keeps the others":                             storage.FeatureQueueLimits,
	"eager/an eager run holds its place in a limited queue and counts as a start":                   storage.FeatureQueueLimits,
	"versions/a run of a version not allowed holds no place in its queue until a claim allows it":   storage.FeatureQueueLimits,
	"queue/concurrency: a full queue claims nothing until a place frees, by any way out of running": storage.FeatureQueueLimits,
	"queue/concurrency: an expired lease holds its place, and its recovery is not held back":        storage.FeatureQueueLimits,
	"queue/concurrency: concurrent claimers never exceed the limit":                                 storage.FeatureQueueLimits,
	"queue/a claim passes over a full queue to another it names":                                    storage.FeatureQueueLimits,
	"queue/partition: one run per key at once, other keys and no key run":                           storage.FeatureQueueLimits,
	"queue/rate: starts within a window; recoveries and resumptions are not starts, a restart is":   storage.FeatureQueueLimits,
	"queue/stats count runs by state per named queue":                                               storage.FeatureQueueLimits,
	"queue/priority: higher first, oldest ready first within one, across workflows":                 storage.FeatureGlobalOrder,
	"queue/a recovery goes first within its priority, not before a higher priority":                 storage.FeatureGlobalOrder,
	"purge/limit bounds a batch, oldest ended first; a dry run counts and deletes nothing":          storage.FeatureGlobalOrder,
}

// featureCases are what a store that lacks a feature must do instead.
var featureCases = map[storage.Feature]testCase{
	storage.FeatureStartKeys:   {"features/without start keys, a keyed create is refused and writes nothing", testLacksStartKeys},
	storage.FeatureQueueLimits: {"features/without queue limits, a limited claim or catalog is refused and changes nothing", testLacksQueueLimits},
	storage.FeatureGlobalOrder: {"features/without one order, claims still take every ready run once and purge batches keep their bound", testLacksGlobalOrder},
}

// lacking returns the features s lacks.
func lacking(s storage.Store) map[storage.Feature]bool {
	out := map[storage.Feature]bool{}
	for f := range featureCases {
		if !storage.Has(s, f) {
			out[f] = true
		}
	}
	return out
}

// withFeatures drops the cases that need a feature the store lacks and
// adds that feature's case.
func withFeatures(all []testCase, lacks map[storage.Feature]bool) []testCase {
	if len(lacks) == 0 {
		return all
	}
	kept := all[:0:0]
	for _, c := range all {
		if !lacks[needs[c.name]] {
			kept = append(kept, c)
		}
	}
	for _, f := range []storage.Feature{storage.FeatureStartKeys, storage.FeatureQueueLimits, storage.FeatureGlobalOrder} {
		if lacks[f] {
			kept = append(kept, featureCases[f])
		}
	}
	return kept
}

func testLacksStartKeys(f *fixture) {
	key := &storage.StartKey{Key: "k"}
	_, err := f.store.CreateRuns(f.ctx, []storage.NewRun{
		{ID: "plain", Workflow: wf},
		{ID: "keyed", Workflow: wf, Key: key},
	})
	f.wantErr(err, storage.ErrUnsupported, "a batch with a keyed create")
	if !errors.Is(err, storage.ErrUnsupported) || !containsAll(err.Error(), "keyed", string(storage.FeatureStartKeys)) {
		f.t.Fatalf("error %q names neither the run nor the feature", err)
	}
	for _, id := range []string{"plain", "keyed"} {
		f.wantErr(errOf(f.store.GetRun(f.ctx, id)), storage.ErrRunNotFound, "GetRun of "+id+" after the refused batch")
	}
	f.create("plain", wf, "")
}

func testLacksQueueLimits(f *fixture) {
	f.createRun(storage.NewRun{ID: "run-1", Workflow: wf, Queue: "jobs"})
	limited := []storage.Queue{{Name: "jobs", Concurrency: 1}}
	_, err := f.store.Claim(f.ctx, storage.ClaimRequest{Owner: "worker-a", Workflows: []string{wf}, Limit: 1, LeaseFor: lease, Queues: limited})
	f.wantErr(err, storage.ErrUnsupported, "a claim of a limited queue")
	if !containsAll(err.Error(), "jobs", string(storage.FeatureQueueLimits)) {
		f.t.Fatalf("error %q names neither the queue nor the feature", err)
	}
	f.wantStatus("run-1", storage.StatusQueued)
	got := f.claimFrom("worker-a", 1, []storage.Queue{{Name: "jobs"}})
	if len(got) != 1 || got[0].Lease.RunID != "run-1" {
		f.t.Fatalf("claim of the queue without limits = %+v, want run-1", got)
	}

	before, err := f.store.GetCatalog(f.ctx)
	if err != nil {
		f.t.Fatalf("GetCatalog: %v", err)
	}
	err = f.store.PutCatalog(f.ctx, storage.Catalog{Queues: []storage.QueueType{{Queue: storage.Queue{Name: "jobs", Rate: 2, RatePeriod: time.Second}, Worker: "w", UpdatedAt: f.now()}}})
	f.wantErr(err, storage.ErrUnsupported, "a catalog with a limited queue")
	after, err := f.store.GetCatalog(f.ctx)
	if err != nil {
		f.t.Fatalf("GetCatalog: %v", err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		f.t.Fatalf("catalog after the refused put = %+v, want %+v", after, before)
	}
}

func testLacksGlobalOrder(f *fixture) {
	const n = 24
	for i := range n {
		f.createRun(storage.NewRun{ID: fmt.Sprintf("run-%02d", i), Workflow: wf, Priority: i % 3})
	}
	seen := map[string]bool{}
	for len(seen) < n {
		got := f.claim("worker-a", 5)
		if len(got) == 0 {
			f.t.Fatalf("claims stopped after %d of %d ready runs", len(seen), n)
		}
		for _, c := range got {
			if seen[c.Lease.RunID] {
				f.t.Fatalf("run %s claimed twice", c.Lease.RunID)
			}
			seen[c.Lease.RunID] = true
			f.complete(c.Lease, "")
		}
	}
	f.claimNone()
	f.clock.Advance(time.Second)
	req := storage.PurgeRequest{FinishedBefore: f.now(), Limit: 7}
	total := 0
	for range n {
		res, err := f.store.Purge(f.ctx, req)
		if err != nil {
			f.t.Fatalf("Purge: %v", err)
		}
		if res.Runs > req.Limit {
			f.t.Fatalf("a purge batch deleted %d runs, over its limit %d", res.Runs, req.Limit)
		}
		if res.Runs == 0 {
			break
		}
		total += res.Runs
	}
	if total != n {
		f.t.Fatalf("purge batches deleted %d runs in all, want %d", total, n)
	}
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
