package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/stores/storeurl"
)

// quiet clears the environment the command reads.
func quiet(t *testing.T) {
	t.Helper()
	t.Setenv("STEM_STORE", "")
	t.Setenv("STEM_CODEC_KEY", "")
}

// files is every file in dir with its contents.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

// otherAppDB writes another application's SQLite database, in rollback
// journal mode.
func otherAppDB(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer TEXT, total INTEGER)`,
		`INSERT INTO invoices (customer, total) VALUES ('ada', 120), ('bob', 80)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

func journalMode(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// Pointed at another application's SQLite file, every command (init
// included) refuses in one line saying so, and the file keeps every byte
// and its journal mode; no file appears beside it.
func TestOtherApplicationsFileUntouched(t *testing.T) {
	quiet(t)
	dir := t.TempDir()
	other := filepath.Join(dir, "other.db")
	otherAppDB(t, other)
	before := files(t, dir)
	for _, args := range [][]string{
		{"runs"}, {"show", "x"}, {"workflows"},
		{"send", "x", "approval", "true"}, {"emit", "approval", "true"}, {"start", "greet", `{"name":"ada"}`},
		{"pause", "x"}, {"resume", "x"}, {"restart", "x"}, {"terminate", "x"},
		{"init"},
	} {
		_, errOut := cliAt(t, 1, append([]string{"--store", other}, args...)...)
		want := "stem: no Stem store at " + other + ": the file was made by another application"
		if !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("stem %v: %q, want one line starting %q", args, errOut, want)
		}
	}
	after := files(t, dir)
	if len(after) != len(before) || after["other.db"] != before["other.db"] {
		t.Fatalf("the commands changed the directory: %d files before, %d after; other.db unchanged: %v",
			len(before), len(after), after["other.db"] == before["other.db"])
	}
	if mode := journalMode(t, other); mode != "delete" {
		t.Fatalf("journal_mode = %s, want delete", mode)
	}
}

// A mistyped path is refused and nothing is created; stem init creates the
// store and says so, the commands then work, and a second init changes
// nothing.
func TestInitCreatesTheStore(t *testing.T) {
	quiet(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "stme.db")
	if _, errOut := cliAt(t, 1, "--store", path, "runs"); errOut != "stem: no Stem store at "+path+": the file does not exist; run \"stem init --store "+path+"\" first to create one\n" {
		t.Fatalf("runs on a missing file: %q", errOut)
	}
	cliAt(t, 1, "--store", path, "pause", "x")
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("refused commands created %v", got)
	}
	if _, errOut := cliAt(t, 1, "--store", filepath.Join(dir, "nodir", "stem.db"), "init"); !strings.Contains(errOut, "nodir") {
		t.Fatalf("init in a missing directory: %q", errOut)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("a failed init created %v", got)
	}

	v := strconv.Itoa(sqlitestore.SchemaVersion())
	if out, _ := cliAt(t, 0, "--store", path, "init"); out != "created a Stem store at "+path+" (schema version "+v+")\n" {
		t.Fatalf("init: %q", out)
	}
	if out, _ := cliAt(t, 0, "--store", path, "runs"); out != "no runs\n" {
		t.Fatalf("runs after init: %q", out)
	}
	if out, _ := cliAt(t, 0, "--store", path, "init"); out != "the Stem store at "+path+" is already current (schema version "+v+")\n" {
		t.Fatalf("second init: %q", out)
	}
	out, _ := cliAt(t, 0, "--store", path, "--json", "init")
	var got jsonInit
	if err := json.Unmarshal([]byte(out), &got); err != nil || got != (jsonInit{Store: path, Result: "current", FromVersion: sqlitestore.SchemaVersion(), ToVersion: sqlitestore.SchemaVersion()}) {
		t.Fatalf("init --json: %s (%v)", out, err)
	}
}

// v1Store writes a Stem store at schema version 1, as a worker of that
// version left it (in WAL mode, with one run).
func v1Store(t *testing.T, path string) {
	t.Helper()
	ddl, err := os.ReadFile(filepath.Join("..", "..", "stores", "sqlitestore", "migrations", "001_init.up.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	for _, q := range []string{
		`CREATE TABLE stem_schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`,
		string(ddl),
		`INSERT INTO stem_schema_migrations (version, name, applied_at) VALUES (1, 'init', 0)`,
		fmt.Sprintf(`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES (1, 'old-1', 'greet', 'queued', %d, %[1]d, %[1]d)`, created),
		`INSERT INTO run_data (ref, input) VALUES (1, x'7b7d')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
}

// A store at an older schema version is refused by every command but
// init, which migrates it; the refused commands leave the database as it
// was (its WAL, if a reader made one, stays empty).
func TestOldSchemaNeedsInit(t *testing.T) {
	quiet(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "stem.db")
	v1Store(t, path)
	before := files(t, dir)
	v := strconv.Itoa(sqlitestore.SchemaVersion())
	for _, args := range [][]string{{"runs"}, {"show", "old-1"}, {"workflows"}, {"pause", "old-1"}, {"terminate", "old-1"}, {"start", "greet", "{}"}} {
		_, errOut := cliAt(t, 1, append([]string{"--store", path}, args...)...)
		want := "stem: the Stem store at " + path + " is at schema version 1, this program uses version " + v + "; run `stem init` or a worker of this version to migrate it\n"
		if errOut != want {
			t.Fatalf("stem %v: %q, want %q", args, errOut, want)
		}
	}
	after := files(t, dir)
	if after["stem.db"] != before["stem.db"] || after["stem.db-wal"] != "" {
		t.Fatal("the refused commands wrote to the database")
	}

	if out, _ := cliAt(t, 0, "--store", path, "init"); out != "migrated the Stem store at "+path+" from schema version 1 to "+v+"\n" {
		t.Fatalf("init: %q", out)
	}
	if out, _ := cliAt(t, 0, "--store", path, "runs"); !strings.Contains(out, "old-1") {
		t.Fatalf("runs after init:\n%s", out)
	}
}

// On Postgres, a command naming a schema that does not exist creates no
// schema (and says which schema on which server is missing); a stem_schema
// that is not a plain identifier is refused, never dropped in favour of
// the default; stem init creates the schema.
func TestPostgresSchemaNotCreated(t *testing.T) {
	base := os.Getenv("STEM_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("STEM_TEST_POSTGRES_URL not set")
	}
	quiet(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	schema := fmt.Sprintf("stem_cli_init_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
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
	for _, args := range [][]string{{"runs"}, {"show", "x"}, {"workflows"}, {"pause", "x"}, {"send", "x", "approval", "true"}} {
		_, errOut := cliAt(t, 1, append([]string{"--store", u}, args...)...)
		if !strings.Contains(errOut, schema) || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("stem %v: %q, want one line naming the schema", args, errOut)
		}
		if exists(schema) {
			t.Fatalf("stem %v created the schema %s", args, schema)
		}
	}
	for _, bad := range []string{"a;b", "a%3Bb", "1abc", "a-b", strings.Repeat("x", 64), ""} {
		_, errOut := cliAt(t, 1, "--store", base+sep+"stem_schema="+bad, "runs")
		if !strings.Contains(errOut, "stem_schema") || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("stem_schema=%s: %q, want an error naming stem_schema", bad, errOut)
		}
	}
	if exists("a") {
		t.Fatal(`stem_schema=a;b created the schema "a"`)
	}

	if out, _ := cliAt(t, 0, "--store", u, "init"); !strings.HasPrefix(out, "created a Stem store at ") || !strings.Contains(out, schema) {
		t.Fatalf("init: %q", out)
	}
	if !exists(schema) {
		t.Fatal("init did not create the schema")
	}
	if out, _ := cliAt(t, 0, "--store", u, "runs"); out != "no runs\n" {
		t.Fatalf("runs after init: %q", out)
	}
	if out, _ := cliAt(t, 0, "--store", u, "init"); !strings.Contains(out, "is already current") {
		t.Fatalf("second init: %q", out)
	}
}

// On Redis, the read commands write no key: not under a prefix that holds
// no store (which they refuse), not in a store with runs.
func TestRedisReadsWriteNothing(t *testing.T) {
	base := os.Getenv("STEM_TEST_REDIS_URL")
	if base == "" {
		t.Skip("STEM_TEST_REDIS_URL not set")
	}
	quiet(t)
	ctx := context.Background()
	opt, err := redis.ParseURL(base)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	prefix := fmt.Sprintf("stem-cli-init-%d:", time.Now().UnixNano())
	keys := func() map[string]string { return redisKeys(t, client, prefix) }
	cleanRedisPrefix(t, prefix)
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	u := base + sep + "stem_prefix=" + prefix
	for _, args := range [][]string{{"runs"}, {"show", "x"}, {"workflows"}} {
		_, errOut := cliAt(t, 1, append([]string{"--store", u}, args...)...)
		if !strings.Contains(errOut, prefix) || strings.Count(errOut, "\n") != 1 {
			t.Fatalf("stem %v on an empty prefix: %q, want one line naming the prefix", args, errOut)
		}
	}
	if got := keys(); len(got) != 0 {
		t.Fatalf("read commands wrote %v", got)
	}
	if _, errOut := cliAt(t, 1, "--store", base+sep+"stem_prefix=bad prefix*", "runs"); !strings.Contains(errOut, "stem_prefix") {
		t.Fatalf("a bad stem_prefix: %q", errOut)
	}

	if out, _ := cliAt(t, 0, "--store", u, "init"); !strings.HasPrefix(out, "created a Stem store at ") {
		t.Fatalf("init: %q", out)
	}
	st, err := storeurl.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "greet", Input: []byte(`{"name":"ada"}`)}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	before := keys()
	for _, args := range [][]string{{"runs"}, {"show", "r1"}, {"workflows"}, {"--json", "runs", "--status", "queued"}} {
		cliAt(t, 0, append([]string{"--store", u}, args...)...)
	}
	after := keys()
	if len(after) != len(before) {
		t.Fatalf("keys before %v, after %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("the read commands changed %s", k)
		}
	}
}

// redisKeys is every key under the prefix with its serialized value.
func redisKeys(t *testing.T, client *redis.Client, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	m := map[string]string{}
	iter := client.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		v, err := client.Dump(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		m[iter.Val()] = v
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// cleanRedisPrefix deletes every key under the prefix, on the server of
// $STEM_TEST_REDIS_URL, when the test ends.
func cleanRedisPrefix(t *testing.T, prefix string) {
	t.Helper()
	opt, err := redis.ParseURL(os.Getenv("STEM_TEST_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	t.Cleanup(func() {
		defer client.Close()
		for k := range redisKeys(t, client, prefix) {
			client.Del(context.Background(), k)
		}
	})
}
