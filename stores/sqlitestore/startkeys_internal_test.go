package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// A database written by schema version 11 is upgraded in place: a stored
// run that is replaced leaves its token to the run made in its place; its
// runs hold no start key, so a create with a key makes a run even beside
// a stored run of the workflow; the key's record is then kept by run,
// joined while its run has not ended, and deleted with the run by Purge,
// leaving no record that names a missing run.
func TestMigrateFromVersion11(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 11)
	defer s.Close()
	n := time.Now().UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES (1, 'old', 'wf', 'queued', ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO runs (ref, id, workflow, status, owner, lease_until, token, first_claimed_at, created_at, updated_at)
			VALUES (2, 'running', 'wf2', 'running', 'w', ?1, 3, ?1, ?1, ?1)`, []any{n + int64(time.Hour)}},
		{`INSERT INTO run_data (ref, input) VALUES (1, x'01'), (2, x'02')`, nil},
		{`INSERT INTO executions (run_ref, number, started_at) VALUES (1, 1, ?1), (2, 1, ?1)`, []any{n}},
	})

	// A stored run claimed three times, replaced: the new run's first
	// claim goes on from its token.
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "running", Workflow: "wf2", OnExisting: storage.ExistingReplace,
		Replace: &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}}}})
	if err != nil || !res[0].Replaced || res[0].ReplacedStatus != storage.StatusRunning {
		t.Fatalf("CreateRuns(replace the stored running run) = %+v, %v", res, err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf2"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 || claimed[0].Lease.Token != 4 {
		t.Fatalf("Claim of the new run = %+v, %v; want token 4", claimed, err)
	}

	key := &storage.StartKey{Key: "tenant-1"}
	res, err = s.CreateRuns(ctx, []storage.NewRun{{ID: "k1", Workflow: "wf", Key: key}})
	if err != nil || !res[0].Created || res[0].Joined {
		t.Fatalf("CreateRuns(k1 with a key) = %+v, %v; want created", res, err)
	}
	res, err = s.CreateRuns(ctx, []storage.NewRun{{ID: "k2", Workflow: "wf", Key: key}})
	if err != nil || res[0].Created || !res[0].Joined || res[0].Run.ID != "k1" {
		t.Fatalf("CreateRuns(k2 with the key) = %+v, %v; want k1 joined", res, err)
	}
	var holder string
	if err := s.wdb.QueryRowContext(ctx, `SELECT r.id FROM start_keys k JOIN runs r ON r.ref = k.run_ref WHERE k.workflow = 'wf' AND k.key = 'tenant-1'`).Scan(&holder); err != nil || holder != "k1" {
		t.Fatalf("stored holder = %q, %v; want k1", holder, err)
	}

	if _, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "k1", Error: storage.ErrorInfo{Message: "stop"}}); err != nil {
		t.Fatal(err)
	}
	pr, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: time.Now().Add(time.Hour), Limit: 10})
	if err != nil || pr.Runs != 1 {
		t.Fatalf("Purge = %+v, %v; want k1 purged", pr, err)
	}
	var records int
	if err := s.wdb.QueryRowContext(ctx, `SELECT count(*) FROM start_keys`).Scan(&records); err != nil || records != 0 {
		t.Fatalf("%d start key records after the purge (%v), want none", records, err)
	}
	if rows, err := s.wdb.QueryContext(ctx, `PRAGMA foreign_key_check`); err != nil || rows.Next() {
		t.Fatalf("foreign_key_check found violations (%v)", err)
	} else {
		rows.Close()
	}
	res, err = s.CreateRuns(ctx, []storage.NewRun{{ID: "k3", Workflow: "wf", Key: key}})
	if err != nil || !res[0].Created {
		t.Fatalf("CreateRuns(k3 with the purged holder's key) = %+v, %v; want created", res, err)
	}
}
