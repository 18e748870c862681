package sqlitestore

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stemflow/stem/storage"
)

// The embedded migrations start at 001 and have no gaps.
func TestMigrationsGapFree(t *testing.T) {
	t.Parallel()
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || !strings.HasPrefix(entries[0].Name(), "001_") {
		t.Fatalf("migrations do not start at 001: %v", entries)
	}
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != len(entries) {
		t.Fatalf("%d migrations loaded from %d files", len(ms), len(entries))
	}
	for i, m := range ms {
		if m.Version != i+1 || strings.TrimSpace(m.SQL) == "" {
			t.Fatalf("migration %d is version %d (%q)", i+1, m.Version, m.Name)
		}
	}
	if SchemaVersion() != len(ms) {
		t.Fatalf("SchemaVersion() = %d, want %d", SchemaVersion(), len(ms))
	}
}

// loadMigrations refuses sets that skip a number or do not start at 001.
func TestLoadMigrationsRefusesGaps(t *testing.T) {
	t.Parallel()
	file := &fstest.MapFile{Data: []byte("SELECT 1;")}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":      {"migrations/001_a.up.sql": file, "migrations/003_c.up.sql": file},
		"start":    {"migrations/002_b.up.sql": file},
		"dup":      {"migrations/001_a.up.sql": file, "migrations/001_b.up.sql": file},
		"bad name": {"migrations/1_a.up.sql": file},
		"empty":    {"migrations/README": nil},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: loadMigrations accepted %v", name, fsys)
		}
	}
}

// A database written by schema version 1 is upgraded in place: its runs are
// in their first execution, started at their creation (a finished one
// ended at its last update), their checkpoints and attempts belong to it,
// and attempts encoded by version 1 still decode.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stem.db")
	s, err := Open(path, Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.migrate(ctx, ms[:1]); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	updated := created.Add(time.Minute)
	c0, u0 := created.UnixNano(), updated.UnixNano()
	v1Attempts := []byte{1, 1, 4, 'a', '@', 'v', '1', 2, 3, 0} // key "a@v1", number 1, no times, no error
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES (1, 'open', 'wf', 'queued', ?1, ?1, ?2)`, []any{c0, u0}},
		{`INSERT INTO run_data (ref, input) VALUES (1, x'01')`, nil},
		{`INSERT INTO runs (ref, id, workflow, status, created_at, updated_at) VALUES (2, 'done', 'wf', 'errored', ?1, ?2)`, []any{c0, u0}},
		{`INSERT INTO run_data (ref, error_message, error_code) VALUES (2, 'boom', 'E1')`, nil},
		{`INSERT INTO checkpoints (seq, run_ref, key, kind, output, attempts, created_at) VALUES (7, 1, 'a@v1', 'step', x'', ?1, ?2)`, []any{v1Attempts, c0}},
		{`INSERT INTO attempts (run_ref, key, number, error, after_checkpoint) VALUES (1, 'b@v1', 1, 'failed', 0)`, nil},
	})
	if rows, err := s.wdb.QueryContext(ctx, `PRAGMA foreign_key_check`); err != nil || rows.Next() {
		t.Fatalf("foreign_key_check found violations (%v)", err)
	} else {
		rows.Close()
	}

	open, err := s.GetRun(ctx, "open")
	if err != nil || open.Execution != 1 || !open.StartedAt.Equal(created) || open.EndedAt != nil {
		t.Fatalf("GetRun(open) = %+v, %v", open, err)
	}
	done, err := s.GetRun(ctx, "done")
	if err != nil || done.Execution != 1 || done.EndedAt == nil || !done.EndedAt.Equal(updated) {
		t.Fatalf("GetRun(done) = %+v, %v", done, err)
	}
	execs, err := s.ListExecutions(ctx, "done")
	if err != nil || len(execs) != 1 || execs[0].Status != storage.StatusErrored || execs[0].Error == nil || execs[0].Error.Code != "E1" {
		t.Fatalf("ListExecutions(done) = %+v, %v", execs, err)
	}
	rp, err := s.LoadReplay(ctx, "open")
	if err != nil || rp.Execution != 1 || len(rp.Checkpoints) != 1 || rp.Checkpoints[0].Seq != 7 || rp.Checkpoints[0].Execution != 1 ||
		len(rp.Pending) != 1 || rp.Pending[0].Key != "b@v1" || rp.Pending[0].Execution != 1 {
		t.Fatalf("LoadReplay(open) = %+v, %v", rp, err)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "open", Execution: 1})
	if err != nil || len(h.Steps) != 1 || len(h.Steps[0].Attempts) != 1 || h.Steps[0].Attempts[0].Number != 1 || len(h.Pending) != 1 {
		t.Fatalf("ListSteps(open) = %+v, %v", h, err)
	}
	if SchemaVersion() < 2 {
		t.Fatalf("SchemaVersion() = %d", SchemaVersion())
	}
}

// openAtVersion opens a new store at path migrated only to schema version
// n, as an older release left it.
func openAtVersion(t *testing.T, path string, n int) *Store {
	t.Helper()
	s, err := Open(path, Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	if err := s.migrate(t.Context(), ms[:n]); err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s
}

// seedRow is a statement that writes rows in a store's older schema, with
// its arguments.
type seedRow struct {
	sql  string
	args []any
}

// migrateSeeded writes rows into s, a store at an older schema version
// (openAtVersion), migrates it to the newest, and checks that the database
// is sound.
func migrateSeeded(t *testing.T, ctx context.Context, s *Store, rows []seedRow) {
	t.Helper()
	for _, q := range rows {
		if _, err := s.wdb.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var integrity string
	if err := s.wdb.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q, %v", integrity, err)
	}
}
