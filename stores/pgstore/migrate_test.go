package pgstore

import (
	"context"
	"errors"
	"os"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/stemflow/stem/storage"
)

// TestMigrationsGapFree checks the files on disk, not only what loads: every
// file in migrations/ is an up migration, numbered 1..N without gaps.
func TestMigrationsGapFree(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^(\d{3})_[a-z0-9_]+\.up\.sql$`)
	var versions []int
	for _, e := range entries {
		m := name.FindStringSubmatch(e.Name())
		if m == nil {
			t.Fatalf("migrations/%s is not named NNN_name.up.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		versions = append(versions, v)
	}
	sort.Ints(versions)
	if len(versions) == 0 {
		t.Fatal("no migrations")
	}
	for i, v := range versions {
		if v != i+1 {
			t.Fatalf("migration versions %v are not 1..%d without gaps", versions, len(versions))
		}
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatalf("loadMigrations: %v", err)
	}
	if len(ms) != len(versions) {
		t.Fatalf("embedded %d migrations, %d on disk", len(ms), len(versions))
	}
}

// TestMigrateConcurrent starts eight stores on one fresh schema at once, as
// processes starting together do: each migration is applied exactly once and
// no start fails.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	pool := sharedPool(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			s, err := New(context.Background(), pool, Options{Schema: schema})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	var n, max int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*), max(version) FROM `+quote(schema)+`.migrations`).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || max != len(ms) {
		t.Fatalf("migrations table has %d rows up to version %d, want %d", n, max, len(ms))
	}
	// Migrating again is a no-op.
	s := newTestStore(t, Options{Schema: schema})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaTooNew: a database migrated by newer code is refused, clearly,
// and left as it was.
func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.schema+`.migrations (version, name) VALUES (999, 'from_the_future')`); err != nil {
		t.Fatal(err)
	}
	err := s.Migrate(ctx)
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Migrate on a newer schema: %v, want ErrSchemaTooNew", err)
	}
	if !regexp.MustCompile(`version 999`).MatchString(err.Error()) {
		t.Fatalf("error %q does not name the database's version", err)
	}
	_, err = New(ctx, s.pool, Options{Schema: unquote(s.schema)})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("New on a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

func TestSchemaNameValidated(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	for _, name := range []string{`bad"name`, "1abc", "with space", "semi;colon", "x-y",
		"a_name_that_is_far_too_long_for_a_notification_channel_name_xx"} {
		if _, err := New(context.Background(), pool, Options{Schema: name}); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("schema %q: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestOpenOwnsPool: Open's store closes its own pool; calls after Close
// report ErrClosed.
func TestOpenOwnsPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	s, err := Open(ctx, testURL(t), Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Pool().Config().MaxConns; got != defaultMaxConns {
		t.Errorf("pool size %d, want %d", got, defaultMaxConns)
	}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "a", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx, "a"); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("GetRun after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	if err := s.Pool().Ping(ctx); err == nil {
		t.Fatal("the owned pool is still open after Close")
	}
}

func quote(schema string) string { return `"` + schema + `"` }

func unquote(quoted string) string { return quoted[1 : len(quoted)-1] }
