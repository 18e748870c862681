package sqlitestore

import (
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// A database written by schema version 5 is upgraded in place: its runs,
// unfinished and finished, have no headers, in their records and their
// claims, recoveries too; runs created since keep theirs; and the store
// has no workers until one is put.
func TestMigrateFromVersion5(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 5)
	defer s.Close()
	now := time.Now()
	n := now.UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES (1, 'queued', 'wf', 'queued', ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO runs (ref, id, workflow, status, owner, token, lease_until, first_claimed_at, created_at, updated_at)
			VALUES (2, 'expired', 'wf', 'running', 'w', 1, ?1, ?1, ?1, ?1)`, []any{n - int64(time.Minute)}},
		{`INSERT INTO runs (ref, id, workflow, status, token, ended_at, created_at, updated_at) VALUES (3, 'done', 'wf', 'complete', 1, ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO run_data (ref, input) VALUES (1, x'01'), (2, x'02'), (3, x'03')`, nil},
		{`INSERT INTO executions (run_ref, number, started_at) VALUES (1, 1, ?1), (2, 1, ?1), (3, 1, ?1)`, []any{n}},
	})

	for _, id := range []string{"queued", "expired", "done"} {
		rec, err := s.GetRun(ctx, id)
		if err != nil || rec.Headers != nil {
			t.Fatalf("GetRun(%s) = %+v, %v; want no headers", id, rec, err)
		}
	}
	page, err := s.ListRuns(ctx, storage.ListRunsQuery{})
	if err != nil || len(page.Runs) != 3 {
		t.Fatalf("ListRuns = %+v, %v; want the three runs", page, err)
	}
	for _, r := range page.Runs {
		if r.Headers != nil {
			t.Fatalf("ListRuns shows %s with headers %q, want none", r.ID, r.Headers)
		}
	}
	traced := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "traced", Workflow: "wf", Headers: traced}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w2", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(got) != 3 {
		t.Fatalf("Claim = %+v, %v; want the recovery, the stored run and the new one", got, err)
	}
	for _, cr := range got {
		want := map[string]string(nil)
		if cr.Lease.RunID == "traced" {
			want = traced
		}
		if !maps.Equal(cr.Headers, want) || (want == nil) != (cr.Headers == nil) {
			t.Fatalf("the claim of %s brought headers %q, want %q", cr.Lease.RunID, cr.Headers, want)
		}
	}

	ws, err := s.ListWorkers(ctx)
	if err != nil || len(ws) != 0 {
		t.Fatalf("ListWorkers = %+v, %v; want none", ws, err)
	}
	if err := s.PutWorker(ctx, storage.PutWorkerRequest{Worker: storage.Worker{ID: "w2", StartedAt: now}, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if ws, err := s.ListWorkers(ctx); err != nil || len(ws) != 1 || ws[0].ID != "w2" {
		t.Fatalf("ListWorkers after a put = %+v, %v; want w2", ws, err)
	}
}

// A run's headers are stored as a JSON object, and a run without any (nil
// or empty) as NULL, which is all the claim of such a run reads of them.
// Expired worker records are deleted by the next put.
func TestHeadersAndWorkersStored(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := storetest.NewClock(storetest.Start)
	s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateRuns(ctx, []storage.NewRun{
		{ID: "nil", Workflow: "wf"},
		{ID: "empty", Workflow: "wf", Headers: map[string]string{}},
		{ID: "traced", Workflow: "wf", Headers: map[string]string{"traceparent": "00-a", "baggage": "k=<v>&ü"}},
	}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]*string{"nil": nil, "empty": nil, "traced": ptr(`{"baggage":"k=\u003cv\u003e\u0026ü","traceparent":"00-a"}`)} {
		var got *string
		if err := s.rdb.QueryRowContext(ctx, `SELECT d.headers FROM run_data d JOIN runs r ON r.ref = d.ref WHERE r.id = ?1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("run %s: headers stored as %v, want %v", id, deref(got), deref(want))
		}
	}

	put := func(id string, ttl time.Duration) {
		t.Helper()
		if err := s.PutWorker(ctx, storage.PutWorkerRequest{Worker: storage.Worker{ID: id, StartedAt: clock.Now()}, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() int {
		t.Helper()
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM workers`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	put("short", time.Second)
	put("long", time.Hour)
	clock.Advance(time.Minute)
	if ws, err := s.ListWorkers(ctx); err != nil || len(ws) != 1 || ws[0].ID != "long" {
		t.Fatalf("ListWorkers = %+v, %v; want long alone", ws, err)
	}
	if n := stored(); n != 2 {
		t.Fatalf("%d worker records before the next put, want 2 (listing reads only)", n)
	}
	put("long", time.Hour)
	if n := stored(); n != 1 {
		t.Fatalf("%d worker records after a put, want 1: the expired one deleted", n)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
