package storeurl_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/stores/storeurl"
)

// ReadOnly and OpenExisting refuse another application's SQLite database
// with ErrNotStore and leave it byte for byte; a read-only store reads and
// refuses writes.
func TestReadOnlySQLite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other+"?_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('hello')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []storeurl.Options{{ReadOnly: true}, {OpenExisting: true}} {
		_, err := storeurl.OpenWith(ctx, other, opts)
		if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), "made by another application") {
			t.Fatalf("%+v: %v, want ErrNotStore", opts, err)
		}
	}
	if _, err := storeurl.Init(ctx, other, storeurl.Options{}); !errors.Is(err, storage.ErrNotStore) {
		t.Fatalf("Init(other) = %v, want ErrNotStore", err)
	}
	if after, _ := os.ReadFile(other); string(after) != string(before) {
		t.Fatal("the refused opens changed the file")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the refused opens created files: %v", entries)
	}

	path := filepath.Join(dir, "stem.db")
	w, err := storeurl.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.CreateRuns(ctx, []storage.NewRun{{ID: "a", Workflow: "wf", Input: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	r, err := storeurl.OpenWith(ctx, path, storeurl.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.GetRun(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := r.Pause(ctx, "a"); !errors.Is(err, sqlitestore.ErrReadOnly) {
		t.Fatalf("Pause on a read-only store = %v, want ErrReadOnly", err)
	}
}

// Init creates a SQLite store, then finds it current; mem: has nothing to
// initialise.
func TestInitSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "stem.db")
	v := sqlitestore.SchemaVersion()
	r, err := storeurl.Init(ctx, "sqlite:"+path, storeurl.Options{})
	if err != nil || r != (storeurl.InitReport{Store: path, From: 0, To: v}) {
		t.Fatalf("Init = %+v, %v", r, err)
	}
	if got, want := r.String(), fmt.Sprintf("created a Stem store at %s (schema version %d)", path, v); got != want {
		t.Fatalf("report %q, want %q", got, want)
	}
	r, err = storeurl.Init(ctx, path, storeurl.Options{})
	if err != nil || r.From != v || r.To != v || !strings.Contains(r.String(), "already current") {
		t.Fatalf("second Init = %+v (%s), %v", r, r, err)
	}
	if got := (storeurl.InitReport{Store: "x.db", From: 1, To: 2}).String(); got != "migrated the Stem store at x.db from schema version 1 to 2" {
		t.Fatalf("migration report %q", got)
	}
	if _, err := storeurl.Init(ctx, "mem:", storeurl.Options{}); err == nil {
		t.Fatal("Init(mem:) succeeded")
	}
}

// stem_schema and stem_prefix are parsed strictly: a value that is not a
// plain name, a repeated parameter, or a ';' anywhere in the query is an
// error naming the parameter, found before anything is dialled (the
// servers named here do not exist).
func TestStrictParams(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{"postgres://u@127.0.0.1:1/db?stem_schema=a;b", `stem_schema="a;b"`},
		{"postgres://u@127.0.0.1:1/db?stem_schema=a%3Bb", `stem_schema="a;b"`},
		{"postgres://u@127.0.0.1:1/db?sslmode=disable&stem_schema=1a", `stem_schema="1a"`},
		{"postgres://u@127.0.0.1:1/db?stem_schema=a-b", `stem_schema="a-b"`},
		{"postgres://u@127.0.0.1:1/db?stem_schema=" + strings.Repeat("s", 64), "stem_schema="},
		{"postgres://u@127.0.0.1:1/db?stem_schema=", `stem_schema=""`},
		{"postgres://u@127.0.0.1:1/db?stem_schema=a&stem_schema=b", "stem_schema is given more than once"},
		{"postgres://u@127.0.0.1:1/db?stem_schema=ok&sslmode=disable;x=y", "sslmode holds a ';'"},
		{"redis://127.0.0.1:1/0?stem_prefix=a%20b", `stem_prefix="a b"`},
		{"redis://127.0.0.1:1/0?stem_prefix=keys*", `stem_prefix="keys*"`},
		{"redis://127.0.0.1:1/0?stem_prefix=", `stem_prefix=""`},
		{"redis://127.0.0.1:1/0?stem_prefix=a;b", `stem_prefix="a;b"`},
	} {
		for _, open := range []func() error{
			func() error { _, err := storeurl.Open(ctx, c.url); return err },
			func() error { _, err := storeurl.Init(ctx, c.url, storeurl.Options{}); return err },
		} {
			err := open()
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "refused") {
				t.Fatalf("%s: %v, want an error saying %s", c.url, err, c.want)
			}
		}
	}
	// The accepted forms still reach the server (and fail to connect).
	for _, u := range []string{"postgres://u@127.0.0.1:1/db?stem_schema=Stem_2&sslmode=disable", "redis://127.0.0.1:1/0?stem_prefix={stem}:app-1/x.y_z:"} {
		_, err := storeurl.OpenWith(ctx, u, storeurl.Options{DialTimeout: time.Second})
		if err == nil || strings.Contains(err.Error(), "stem_") {
			t.Fatalf("%s: %v, want a connection error", u, err)
		}
	}
}

// On Postgres, ReadOnly and OpenExisting never create the schema; Init
// creates it, then finds it current, and refuses a schema that holds
// another application's tables.
func TestPostgresOpenExistingAndInit(t *testing.T) {
	base := os.Getenv("STEM_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("STEM_TEST_POSTGRES_URL not set")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	schema := fmt.Sprintf("stem_storeurl_init_%d", time.Now().UnixNano())
	foreign := schema + "_app"
	t.Cleanup(func() {
		for _, s := range []string{schema, foreign} {
			conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
		}
	})
	exists := func(name string) bool {
		t.Helper()
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.schemata WHERE schema_name = $1)`, name).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	u := base + sep + "stem_schema=" + schema
	for _, opts := range []storeurl.Options{{ReadOnly: true}, {OpenExisting: true}} {
		_, err := storeurl.OpenWith(ctx, u, opts)
		if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), schema) {
			t.Fatalf("%+v: %v, want ErrNotStore naming the schema", opts, err)
		}
		if exists(schema) {
			t.Fatalf("%+v created the schema", opts)
		}
	}
	r, err := storeurl.Init(ctx, u, storeurl.Options{})
	if err != nil || r.From != 0 || r.To == 0 || !exists(schema) {
		t.Fatalf("Init = %+v, %v", r, err)
	}
	again, err := storeurl.Init(ctx, u, storeurl.Options{})
	if err != nil || again.From != r.To || again.To != r.To {
		t.Fatalf("second Init = %+v, %v", again, err)
	}
	for _, opts := range []storeurl.Options{{ReadOnly: true}, {OpenExisting: true}} {
		st, err := storeurl.OpenWith(ctx, u, opts)
		if err != nil {
			t.Fatalf("%+v after Init: %v", opts, err)
		}
		st.Close()
	}

	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{foreign}.Sanitize()+"; CREATE TABLE "+pgx.Identifier{foreign, "orders"}.Sanitize()+" (id int)"); err != nil {
		t.Fatal(err)
	}
	_, err = storeurl.Init(ctx, base+sep+"stem_schema="+foreign, storeurl.Options{})
	if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), foreign) {
		t.Fatalf("Init(foreign schema) = %v, want ErrNotStore naming it", err)
	}
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, foreign).Scan(&tables); err != nil || tables != 1 {
		t.Fatalf("the foreign schema has %d tables (%v), want its 1", tables, err)
	}
}

// A worker's Open refuses another application's SQLite database, naming
// it, and changes nothing; sqlite:...?stem_share_file=true lets Open and
// Init add Stem's tables beside the application's.
func TestSQLiteShareFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	newOther := func(name string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		db, err := sql.Open("sqlite", p+"?_pragma=journal_mode(DELETE)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('hello')`); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := newOther("other.db")
	before, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{other, "sqlite:" + other, "sqlite:" + other + "?stem_share_file=false"} {
		_, err := storeurl.Open(ctx, s)
		if !errors.Is(err, sqlitestore.ErrForeignFile) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "notes") {
			t.Fatalf("Open(%s) = %v, want ErrForeignFile naming the file and its table", s, err)
		}
	}
	if after, _ := os.ReadFile(other); string(after) != string(before) {
		t.Fatal("the refused opens changed the file")
	}

	st, err := storeurl.Open(ctx, "sqlite:"+other+"?stem_share_file=true&stem_sync=full")
	if err != nil {
		t.Fatalf("Open with stem_share_file=true: %v", err)
	}
	st.Close()
	shared := newOther("shared.db")
	r, err := storeurl.Init(ctx, "sqlite:"+shared+"?stem_share_file=true", storeurl.Options{})
	if err != nil || r.From != 0 || r.To != sqlitestore.SchemaVersion() {
		t.Fatalf("Init with stem_share_file=true = %+v, %v", r, err)
	}
	// Shared once, the file is a Stem store: it opens as one.
	for _, p := range []string{other, shared} {
		st, err := storeurl.OpenWith(ctx, p, storeurl.Options{OpenExisting: true})
		if err != nil {
			t.Fatalf("OpenExisting(%s) after sharing: %v", p, err)
		}
		st.Close()
	}

	if _, err := storeurl.Open(ctx, "sqlite:"+other+"?stem_share_file=yes"); err == nil || !strings.Contains(err.Error(), `stem_share_file="yes": want true or false`) {
		t.Fatalf("stem_share_file=yes: %v", err)
	}
}
