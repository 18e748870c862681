package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// A database written by schema version 7 is upgraded in place: its runs,
// waiting ones too, are not held, and a run of it can then be held and
// claimed again, the hold stored as a JSON object in runs and cleared by
// the claim, its wait kept throughout.
func TestMigrateFromVersion7(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 7)
	defer s.Close()
	now := time.Now()
	n := now.UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES (1, 'queued', 'wf', 'queued', ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, wait_key, wait_topic, wait_kind, wait_deadline, owner, token, first_claimed_at, created_at, updated_at)
			VALUES (2, 'waiting', 'wf', 'waiting', ?1, 'ship', 'ship.ready', 'event', ?1, 'w', 1, ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO run_data (ref, input) VALUES (1, x'01'), (2, x'02')`, nil},
		{`INSERT INTO executions (run_ref, number, started_at) VALUES (1, 1, ?1), (2, 1, ?1)`, []any{n}},
	})

	page, err := s.ListRuns(ctx, storage.ListRunsQuery{})
	if err != nil || len(page.Runs) != 2 {
		t.Fatalf("ListRuns = %+v, %v; want the two runs", page, err)
	}
	for _, r := range page.Runs {
		if r.Hold != nil {
			t.Fatalf("ListRuns shows %s held (%+v), want no hold", r.ID, r.Hold)
		}
	}
	claim := func(want int) []storage.ClaimedRun {
		t.Helper()
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w2", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
		if err != nil || len(got) != want {
			t.Fatalf("Claim = %+v, %v; want %d runs", got, err, want)
		}
		return got
	}
	got := claim(2)
	held := &storage.Hold{Reason: "the code called b@v1 where the history has a@v1", Recorded: "a@v1", Called: "b@v1", Position: 1, Execution: 1, Since: now}
	for _, cr := range got {
		if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: cr.Lease, ReadyAt: &now, SuspendState: []byte(`{}`), Hold: held}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"queued", "waiting"} {
		rec, err := s.GetRun(ctx, id)
		if err != nil || rec.Hold == nil || rec.Hold.Called != "b@v1" || rec.Hold.Execution != 1 || !rec.Hold.Since.Equal(now) {
			t.Fatalf("GetRun(%s) = %+v, %v; want it held", id, rec, err)
		}
		if id == "waiting" && (rec.Wait == nil || rec.Wait.Topic != "ship.ready") {
			t.Fatalf("held run's wait = %+v, want ship on ship.ready kept", rec.Wait)
		}
	}
	var called string
	if err := s.wdb.QueryRowContext(ctx, `SELECT hold ->> 'called' FROM runs WHERE id = 'queued'`).Scan(&called); err != nil || called != "b@v1" {
		t.Fatalf("stored hold's call = %q, %v; want b@v1", called, err)
	}

	claim(2)
	for _, id := range []string{"queued", "waiting"} {
		rec, err := s.GetRun(ctx, id)
		if err != nil || rec.Hold != nil {
			t.Fatalf("GetRun(%s) after a claim = %+v, %v; want no hold", id, rec, err)
		}
	}
	var holds int
	if err := s.wdb.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE hold IS NOT NULL`).Scan(&holds); err != nil || holds != 0 {
		t.Fatalf("%d runs keep a stored hold after their claims (%v), want none", holds, err)
	}
}
