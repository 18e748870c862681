package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// foreignDB writes another application's SQLite database, in rollback
// journal mode, and returns its path.
func foreignDB(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)`,
		`INSERT INTO customers (name) VALUES ('ada'), ('bob')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// dirState is every file in dir with its contents.
func dirState(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() {
			m[e.Name()+"/"] = nil
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

func sameDir(t *testing.T, dir string, before map[string][]byte) {
	t.Helper()
	after := dirState(t, dir)
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Errorf("%s changed", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s was created", name)
		}
	}
}

// v1Store writes a Stem store at schema version 1, as a worker of that
// version left it, and returns its path.
func v1Store(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "old.db")
	s, err := Open(path, Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.migrate(t.Context(), ms[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// OpenExisting and ReadOnly refuse, with ErrNotStore naming the path and
// the reason, whatever is not a current Stem store, and change nothing:
// no file is created, and another application's database keeps every
// byte (its journal mode included).
func TestOpenExistingRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := foreignDB(t, dir)
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a database\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	cases := []struct{ path, want string }{
		{filepath.Join(dir, "typo.db"), "the file does not exist"},
		{filepath.Join(dir, "typo", "stem.db"), "the file does not exist"},
		{empty, "the file is empty"},
		{text, "is not a SQLite database"},
		{sub, "it is a directory"},
		{other, "was made by another application"},
	}
	for _, opts := range []Options{{OpenExisting: true}, {ReadOnly: true}, {ReadOnly: true, OpenExisting: true}} {
		for _, c := range cases {
			s, err := Open(c.path, opts)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s, %+v) succeeded", c.path, opts)
			}
			if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open(%s, %+v) = %v, want ErrNotStore naming the path and saying %q", c.path, opts, err, c.want)
			}
		}
	}
	sameDir(t, dir, before)
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "delete" {
		t.Fatalf("journal_mode = %q, %v; want delete", mode, err)
	}
}

// A store at a schema version other than this code's is refused by
// OpenExisting and ReadOnly with ErrNotStore, saying what to do and
// leaving the database as it was; Open migrates it, and then it opens.
func TestOpenExistingRefusesOtherVersions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	path := v1Store(t, dir)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{OpenExisting: true}, {ReadOnly: true}} {
		_, err := Open(path, opts)
		want := "is at schema version 1, this program uses version " + strconv.Itoa(SchemaVersion()) + "; run `stem init`"
		if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Open(v1, %+v) = %v, want ErrNotStore saying %q", opts, err, want)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("refusing the store changed the file")
	}
	if v, err := StoredSchemaVersion(ctx, path); err != nil || v != 1 {
		t.Fatalf("StoredSchemaVersion = %d, %v; want 1", v, err)
	}

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A newer version than this code knows is refused too.
	if _, err := s.wdb.ExecContext(ctx, `INSERT INTO stem_schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{OpenExisting: true})
	if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), "schema version 99, newer than this program knows") {
		t.Fatalf("Open(v99) = %v", err)
	}
	if _, err := s.wdb.ExecContext(ctx, `DELETE FROM stem_schema_migrations WHERE version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if v, err := StoredSchemaVersion(ctx, path); err != nil || v != SchemaVersion() {
		t.Fatalf("StoredSchemaVersion after Open = %d, %v; want %d", v, err, SchemaVersion())
	}
	for _, opts := range []Options{{OpenExisting: true}, {ReadOnly: true}} {
		s, err := Open(path, opts)
		if err != nil {
			t.Fatalf("Open(migrated, %+v): %v", opts, err)
		}
		s.Close()
	}
}

// StoredSchemaVersion is 0 where Open would create a store, and refuses
// another application's database.
func TestStoredSchemaVersion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "none.db"), filepath.Join(dir, "none", "x.db")} {
		if v, err := StoredSchemaVersion(ctx, p); err != nil || v != 0 {
			t.Fatalf("StoredSchemaVersion(%s) = %d, %v", p, v, err)
		}
	}
	if _, err := StoredSchemaVersion(ctx, foreignDB(t, dir)); !errors.Is(err, storage.ErrNotStore) {
		t.Fatalf("StoredSchemaVersion(other) = %v, want ErrNotStore", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("StoredSchemaVersion created files: %v", entries)
	}
}

// A read-only Store reads what a writing Store on the same file commits,
// refuses every write with ErrReadOnly naming the operation and the file,
// and never changes the database file.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stem.db")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.CreateRuns(ctx, []storage.NewRun{{ID: "a", Workflow: "wf", Input: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetRun(ctx, "a"); err != nil {
		t.Fatalf("GetRun on the read-only store: %v", err)
	}
	if _, err := w.CreateRuns(ctx, []storage.NewRun{{ID: "b", Workflow: "wf", Input: []byte(`2`)}}); err != nil {
		t.Fatal(err)
	}
	page, err := r.ListRuns(ctx, storage.ListRunsQuery{Limit: 10})
	if err != nil || !slices.ContainsFunc(page.Runs, func(rr storage.RunRecord) bool { return rr.ID == "b" }) {
		t.Fatalf("ListRuns on the read-only store = %+v, %v; want the run written since it opened", page, err)
	}
	if err := w.PutWorker(ctx, storage.PutWorkerRequest{Worker: storage.Worker{ID: "w", StartedAt: time.Now()}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if ws, err := r.ListWorkers(ctx); err != nil || len(ws) != 1 || ws[0].ID != "w" {
		t.Fatalf("ListWorkers on the read-only store = %+v, %v; want the worker put since it opened", ws, err)
	}

	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]func() error{
		"create runs": func() error {
			_, err := r.CreateRuns(ctx, []storage.NewRun{{ID: "c", Workflow: "wf", Input: []byte(`3`)}})
			return err
		},
		"pause":       func() error { return r.Pause(ctx, "a") },
		"put catalog": func() error { return r.PutCatalog(ctx, storage.Catalog{}) },
		"put worker": func() error {
			return r.PutWorker(ctx, storage.PutWorkerRequest{Worker: storage.Worker{ID: "x", StartedAt: time.Now()}, TTL: time.Minute})
		},
		"remove worker": func() error { return r.RemoveWorker(ctx, "w") },
		"migrate":       func() error { return r.Migrate(ctx) },
		"claim": func() error {
			_, err := r.Claim(ctx, storage.ClaimRequest{Owner: "x", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Second})
			return err
		},
	}
	for op, write := range writes {
		err := write()
		if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), op) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s on the read-only store = %v, want ErrReadOnly naming %q and the path", op, err, op)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("writes refused by the read-only store changed the file")
	}
	if _, err := w.GetRun(ctx, "c"); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("run c: %v, want not found", err)
	}
	got, err := w.GetRun(ctx, "a")
	if err != nil || got.PauseRequested || got.Status != storage.StatusQueued {
		t.Fatalf("run a after a refused pause: %+v, %v", got, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetRun(context.Background(), "a"); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("GetRun after Close = %v, want ErrClosed", err)
	}
	if err := r.Pause(context.Background(), "a"); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Pause after Close = %v, want ErrClosed", err)
	}
}

// Open, as a worker calls it, refuses another application's database with
// ErrNotStore and ErrForeignFile, naming the file and its first tables and
// saying what to do, and leaves every byte of it as it was; with
// ShareFile it adds Stem's tables beside the application's, which keep
// their rows. A new file, an empty one and a Stem store open either way.
func TestOpenRefusesForeignFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	other := foreignDB(t, dir)
	many := filepath.Join(dir, "many.db")
	db, err := sql.Open("sqlite", many+"?_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"users", "orders", "audit", "sessions", "invoices"} {
		if _, err := db.Exec(`CREATE TABLE ` + name + ` (id INTEGER PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	before := dirState(t, dir)

	for _, c := range []struct {
		path string
		want []string
	}{
		{other, []string{"made by another application", "none of them Stem's: customers)", "ShareFile"}},
		{many, []string{"none of them Stem's: audit, invoices, orders and 2 more)", "ShareFile", "stem_share_file=true"}},
	} {
		s, err := Open(c.path, Options{})
		if err == nil {
			s.Close()
			t.Fatalf("Open(%s) succeeded on another application's file", c.path)
		}
		if !errors.Is(err, storage.ErrNotStore) || !errors.Is(err, ErrForeignFile) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("Open(%s) = %v, want ErrNotStore and ErrForeignFile naming the path", c.path, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open(%s) = %v, want it to say %q", c.path, err, w)
			}
		}
		// SkipMigrate would let the caller migrate it next: refused too.
		if s, err := Open(c.path, Options{SkipMigrate: true}); !errors.Is(err, ErrForeignFile) {
			if err == nil {
				s.Close()
			}
			t.Errorf("Open(%s, SkipMigrate) = %v, want ErrForeignFile", c.path, err)
		}
	}
	// StoredSchemaVersion (stem init's check) names the tables the same way.
	if _, err := StoredSchemaVersion(ctx, many); !errors.Is(err, ErrForeignFile) || !strings.Contains(err.Error(), "audit, invoices, orders and 2 more") {
		t.Errorf("StoredSchemaVersion(many) = %v, want ErrForeignFile naming the tables", err)
	}
	sameDir(t, dir, before)

	// Told to share the file, Open adds Stem's tables; the application's
	// rows stay, and the file opens without ShareFile from then on.
	s, err := Open(other, Options{ShareFile: true})
	if err != nil {
		t.Fatalf("Open(other, ShareFile): %v", err)
	}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "a", Workflow: "wf", Input: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(other, Options{})
	if err != nil {
		t.Fatalf("Open(shared file) without ShareFile: %v", err)
	}
	s.Close()
	db, err = sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM customers`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("customers after sharing: %d rows, %v; want 2", n, err)
	}

	// A new file and an empty one are a worker's to create.
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "new.db"), empty} {
		s, err := Open(p, Options{})
		if err != nil {
			t.Fatalf("Open(%s): %v", p, err)
		}
		s.Close()
	}
}
