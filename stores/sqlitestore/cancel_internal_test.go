package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// A database written by schema version 8 is upgraded in place: its runs
// have no cancellation requested; a waiting one, cancelled, becomes
// queued with its wait kept, its claim reports the request, stored as the
// reason in runs, and a Restart clears it.
func TestMigrateFromVersion8(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 8)
	defer s.Close()
	n := time.Now().Add(time.Hour).UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES (1, 'queued', 'wf', 'queued', ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, wait_key, wait_topic, wait_kind, owner, token, first_claimed_at, created_at, updated_at)
			VALUES (2, 'waiting', 'wf', 'waiting', NULL, 'ship', 'ship.ready', 'event', 'w', 1, ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO run_data (ref, input) VALUES (1, x'01'), (2, x'02')`, nil},
		{`INSERT INTO executions (run_ref, number, started_at) VALUES (1, 1, ?1), (2, 1, ?1)`, []any{n}},
	})

	page, err := s.ListRuns(ctx, storage.ListRunsQuery{})
	if err != nil || len(page.Runs) != 2 {
		t.Fatalf("ListRuns = %+v, %v; want the two runs", page, err)
	}
	for _, r := range page.Runs {
		if r.CancelRequested || r.CancelReason != "" {
			t.Fatalf("ListRuns shows %s cancelled (%q), want no request", r.ID, r.CancelReason)
		}
	}
	if err := s.Cancel(ctx, storage.CancelRequest{RunID: "waiting", Reason: "no longer needed"}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetRun(ctx, "waiting")
	if err != nil || rec.Status != storage.StatusQueued || !rec.CancelRequested || rec.Wait == nil || rec.Wait.Topic != "ship.ready" {
		t.Fatalf("GetRun(waiting) after Cancel = %+v, %v; want queued, cancelled, its wait kept", rec, err)
	}
	var stored string
	if err := s.wdb.QueryRowContext(ctx, `SELECT cancel_reason FROM runs WHERE id = 'waiting'`).Scan(&stored); err != nil || stored != "no longer needed" {
		t.Fatalf("stored reason = %q, %v", stored, err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w2", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 || got[0].Lease.RunID != "waiting" || !got[0].CancelRequested || got[0].CancelReason != "no longer needed" {
		t.Fatalf("Claim = %+v, %v; want the cancelled run with its request", got, err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "waiting"}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.GetRun(ctx, "waiting"); err != nil || rec.CancelRequested || rec.CancelReason != "" {
		t.Fatalf("GetRun(waiting) after Restart = %+v, %v; want no request", rec, err)
	}
}
