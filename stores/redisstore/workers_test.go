package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// TestWorkerKeys: the records of workers that stopped recording
// themselves leave both keys, the hash and the expiry set, on the next
// put of another worker and on a listing; a removal leaves no entry
// either. (The suite sees only what ListWorkers returns.)
func TestWorkerKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	k := s.keys
	put := func(id string, ttl time.Duration) {
		t.Helper()
		w := storage.Worker{ID: id, StartedAt: storetest.Start}
		if err := s.PutWorker(ctx, storage.PutWorkerRequest{Worker: w, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	held := func(what string, want int64) {
		t.Helper()
		if n := c.HLen(ctx, k.workers()).Val(); n != want {
			t.Errorf("%s: the workers hash holds %d records, want %d", what, n, want)
		}
		if n := c.ZCard(ctx, k.workerExpiry()).Val(); n != want {
			t.Errorf("%s: the expiry set holds %d workers, want %d", what, n, want)
		}
	}
	put("dead-1", time.Second)
	put("dead-2", time.Second)
	put("live", time.Hour)
	held("after three puts", 3)
	clock.Advance(time.Minute)
	put("new", time.Hour)
	held("after a put once two expired", 2)

	put("dead-3", time.Second)
	clock.Advance(time.Minute)
	held("before the listing", 3)
	ws, err := s.ListWorkers(ctx)
	if err != nil || len(ws) != 2 || ws[0].ID != "live" || ws[1].ID != "new" {
		t.Fatalf("ListWorkers = %+v, %v; want live and new", ws, err)
	}
	held("after the listing", 2)

	if err := s.RemoveWorker(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	held("after a removal", 1)
}
