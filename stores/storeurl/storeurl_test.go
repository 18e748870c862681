package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/stores/storeurl"
)

func TestOpenSQLiteAndMemory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, s := range []string{filepath.Join(dir, "a.db"), "sqlite:" + filepath.Join(dir, "b.db"), "mem:"} {
		st, err := storeurl.Open(ctx, s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if _, err := st.ListRuns(ctx, runtimeQuery()); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		st.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, "b.db")); err != nil {
		t.Fatalf("sqlite: form did not create its file: %v", err)
	}
}

// TestOpenSQLiteSync: sqlite:...?stem_sync=full opens the store in FULL
// mode, as its own ceiling probe says; a misspelt parameter or value is an
// error naming it, and creates nothing.
func TestOpenSQLiteSync(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct{ s, want string }{
		{"sqlite:" + filepath.Join(dir, "full.db") + "?stem_sync=full", "synchronous=FULL"},
		{"sqlite:" + filepath.Join(dir, "normal.db") + "?stem_sync=normal", "synchronous=NORMAL"},
		{"sqlite:" + filepath.Join(dir, "plain.db"), "synchronous=NORMAL"},
	} {
		st, err := storeurl.Open(ctx, c.s)
		if err != nil {
			t.Fatalf("%s: %v", c.s, err)
		}
		p, err := st.(storage.CommitProber).ProbeCommits(ctx, 1, 20*time.Millisecond)
		st.Close()
		if err != nil || !strings.Contains(p.Commit, c.want) {
			t.Fatalf("%s: probe %+v, %v; want %s", c.s, p, err, c.want)
		}
	}
	for _, c := range []struct{ s, want string }{
		{"sqlite:" + filepath.Join(dir, "x.db") + "?stem_sync=ful", `stem_sync="ful": want normal or full`},
		{"sqlite:" + filepath.Join(dir, "x.db") + "?stem_synch=full", `unknown query parameter "stem_synch"`},
		{"sqlite:" + filepath.Join(dir, "x.db") + "?stem_sync=full&stem_sync=normal", "given more than once"},
		{"sqlite:?stem_sync=full", "empty SQLite path"},
	} {
		if _, err := storeurl.Open(ctx, c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want an error containing %q", c.s, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused URL created its file: %v", err)
	}
}

func TestOpenServers(t *testing.T) {
	ctx := context.Background()
	if u := os.Getenv("STEM_TEST_POSTGRES_URL"); u == "" {
		t.Log("STEM_TEST_POSTGRES_URL not set: skipping the Postgres form")
	} else {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		schema := fmt.Sprintf("stem_storeurl_%d", time.Now().UnixNano())
		st, err := storeurl.Open(ctx, u+sep+"stem_schema="+schema)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Fatalf("the schema named in the URL was not the one created: %v", err)
		}
	}
	if u := os.Getenv("STEM_TEST_REDIS_URL"); u == "" {
		t.Log("STEM_TEST_REDIS_URL not set: skipping the Redis form")
	} else {
		st, err := storeurl.Open(ctx, u+"?stem_prefix=stem-storeurl-test:")
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
}

func TestOpenRejectsUnknownSchemes(t *testing.T) {
	_, err := storeurl.Open(context.Background(), "mysql://root:secret@localhost/db")
	if err == nil || !strings.Contains(err.Error(), "unknown store scheme") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err %v, want an unknown-scheme error without the password", err)
	}
	if _, err := storeurl.Open(context.Background(), ""); err == nil {
		t.Fatal("empty URL accepted")
	}
}

func runtimeQuery() storage.ListRunsQuery { return storage.ListRunsQuery{Limit: 1} }

// OpenExisting opens an existing SQLite store and refuses a missing file
// (or an empty file, or a directory) with ErrNotStore naming the path,
// creating nothing.
func TestOpenExisting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	made := filepath.Join(dir, "made.db")
	st, err := storeurl.Open(ctx, made)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, s := range []string{made, "sqlite:" + made} {
		st, err := storeurl.OpenWith(ctx, s, storeurl.Options{OpenExisting: true})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		st.Close()
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "sub", "missing.db")
	for _, path := range []string{missing, "sqlite:" + missing, empty, dir} {
		_, err := storeurl.OpenWith(ctx, path, storeurl.Options{OpenExisting: true})
		want := "no Stem store at " + strings.TrimPrefix(path, "sqlite:")
		if !errors.Is(err, storage.ErrNotStore) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: err %v, want ErrNotStore saying %q", path, err, want)
		}
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused open created something: %v", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("a refused open wrote to the empty file: %v %v", fi, err)
	}
}

// DialTimeout bounds a connection to a server that does not answer: the
// open fails within about the timeout, not the drivers' defaults.
func TestOpenDialTimeout(t *testing.T) {
	for _, u := range []string{"postgres://postgres@127.0.0.1:1/x?sslmode=disable", "redis://127.0.0.1:1/0"} {
		start := time.Now()
		_, err := storeurl.OpenWith(context.Background(), u, storeurl.Options{OpenExisting: true, DialTimeout: time.Second})
		if err == nil {
			t.Fatalf("%s: opened", u)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("%s: failed after %v", u, d)
		}
	}
}

// A misspelled scheme is named, with the one meant, rather than taken
// for a SQLite file of that name.
func TestMisspelledScheme(t *testing.T) {
	for in, want := range map[string]string{
		"sqlit:orders.db": `unknown store scheme "sqlit:" in "sqlit:orders.db": did you mean sqlite:?`,
		"postgress:x":     `did you mean postgres:?`,
		"redis:localhost": `a redis store is written redis://HOST/`,
		"rdis:x":          `did you mean redis:?`,
	} {
		_, err := storeurl.Open(t.Context(), in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Open(%q): %v, want %q", in, err, want)
		}
	}
	dir := t.TempDir()
	st, err := storeurl.Open(t.Context(), filepath.Join(dir, "plain.db"))
	if err == nil {
		st.Close()
	}
	if err != nil && strings.Contains(err.Error(), "scheme") {
		t.Fatalf("a plain path was taken for a scheme: %v", err)
	}
}

// A stem_ parameter a store does not take, misspelled or another
// store's, is refused before anything is dialled, naming it and the one
// meant, rather than passed to the driver (pgx would send it to the server
// as a setting). Nothing listens on port 1: reaching the driver would fail
// with a connection error instead.
func TestUnknownStemParameter(t *testing.T) {
	for in, want := range map[string][]string{
		"postgres://postgres@127.0.0.1:1/x?sslmode=disable&stem_shcema=x": {`unknown query parameter "stem_shcema"`, "did you mean stem_schema?"},
		"postgres://127.0.0.1:1/x?STEM_SCHEMA=x":                          {`unknown query parameter "STEM_SCHEMA"`, "did you mean stem_schema?"},
		"postgres://127.0.0.1:1/x?stem_prefix=x":                          {`"stem_prefix": it is a parameter of a Redis store`, "a Postgres store takes stem_listen_url, stem_pooler and stem_schema"},
		"redis://127.0.0.1:1/0?stem_prefx=a:":                             {`unknown query parameter "stem_prefx"`, "did you mean stem_prefix?"},
		"redis://127.0.0.1:1/0?stem_schema=a":                             {`"stem_schema": it is a parameter of a Postgres store`, "a Redis store takes stem_prefix"},
		"sqlite:x.db?stem_snyc=full":                                      {`unknown query parameter "stem_snyc"`, "did you mean stem_sync?"},
		"postgres://127.0.0.1:1/x?stem_poolr=transaction":                 {`unknown query parameter "stem_poolr"`, "did you mean stem_pooler?"},
		"postgres://127.0.0.1:1/x?stem_listen_ulr=postgres%3A%2F%2Fh%2Fx": {`unknown query parameter "stem_listen_ulr"`, "did you mean stem_listen_url?"},
		"postgres://127.0.0.1:1/x?stem_pooler=transactions":               {`stem_pooler="transactions"`, "want transaction"},
		"postgres://127.0.0.1:1/x?stem_listen_url=h:5432":                 {`stem_listen_url="h:5432"`, "direct postgres:// URL"},
		"redis://127.0.0.1:1/0?stem_pooler=transaction":                   {`"stem_pooler": it is a parameter of a Postgres store`},
	} {
		_, err := storeurl.OpenWith(t.Context(), in, storeurl.Options{OpenExisting: true, DialTimeout: time.Second})
		if err == nil {
			t.Fatalf("OpenWith(%q) opened", in)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("OpenWith(%q): %v, want %q", in, err, w)
			}
		}
	}
}
