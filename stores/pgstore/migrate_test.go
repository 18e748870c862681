package pgstore

import (
	"context"
	"errors"
	"maps"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
	_, err = New(ctx, s.Pool(), Options{Schema: unquote(s.schema)})
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

// schemaAt creates a fresh schema holding the store's tables as of schema
// version: migrations 1 to version applied and recorded, as an older
// release left them. It returns the schema and its quoted name, for an
// upgrade test to fill before it opens the store.
func schemaAt(t *testing.T, version int) (schema, q string) {
	t.Helper()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	schema = freshSchema(t)
	q = quote(schema)
	setup := []string{
		`CREATE SCHEMA ` + q,
		`CREATE TABLE ` + q + `.migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
	}
	for _, m := range ms[:version] {
		setup = append(setup, strings.ReplaceAll(m.SQL, schemaPlaceholder, q),
			`INSERT INTO `+q+`.migrations (version, name) VALUES (`+strconv.Itoa(m.Version)+`, '`+m.Name+`')`)
	}
	pool := sharedPool(t)
	for _, sql := range setup {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return schema, q
}

func unquote(quoted string) string { return quoted[1 : len(quoted)-1] }

// TestMigrateExecutions: a database migrated by the first schema, holding
// runs, checkpoints and attempts, is upgraded in place: every run is in its
// first execution, started when it was created, a finished one ended when
// it was last updated, and its checkpoints and attempts belong to it.
func TestMigrateExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	pool := sharedPool(t)
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	q := quote(schema)
	created := time.Date(2029, 5, 6, 7, 8, 9, 0, time.UTC)
	updated := created.Add(time.Hour)
	for _, sql := range []string{
		`CREATE SCHEMA ` + q,
		`CREATE TABLE ` + q + `.migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
		strings.ReplaceAll(ms[0].SQL, schemaPlaceholder, q),
		`INSERT INTO ` + q + `.migrations (version, name) VALUES (1, 'init')`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+q+`.runs (id, workflow, status, error, created_at, updated_at) VALUES
		('done', 'wf', 'errored', '{"message":"boom"}', $1, $2), ('live', 'wf', 'running', NULL, $1, $2)`, created, updated); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+q+`.checkpoints (run_id, key, kind, output, attempts, created_at) VALUES
		('live', 'a@v1', 'step', '\x31', '[{"k":"a@v1","n":1,"s":"2029-05-06T07:08:09Z","e":"2029-05-06T07:08:09Z"}]', $1)`, created); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+q+`.attempts (run_id, key, number, started, ended, error) VALUES
		('live', 'b@v1', 1, $1, $1, 'x')`, created); err != nil {
		t.Fatal(err)
	}

	s := newTestStore(t, Options{Schema: schema})
	for _, id := range []string{"done", "live"} {
		rec, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Execution != 1 || !rec.StartedAt.Equal(created) || rec.ParentPolicy != storage.ParentTerminate || rec.Active != nil {
			t.Fatalf("run %s after the migration: %+v", id, rec)
		}
		if (id == "done") != (rec.EndedAt != nil) || (rec.EndedAt != nil && !rec.EndedAt.Equal(updated)) {
			t.Fatalf("run %s ended at %v", id, rec.EndedAt)
		}
		execs, err := s.ListExecutions(ctx, id)
		if err != nil || len(execs) != 1 || execs[0].Number != 1 || !execs[0].StartedAt.Equal(created) || execs[0].Status != rec.Status {
			t.Fatalf("executions of %s: %v %+v", id, err, execs)
		}
	}
	rp, err := s.LoadReplay(ctx, "live")
	if err != nil || rp.Execution != 1 || len(rp.Checkpoints) != 1 || rp.Checkpoints[0].Execution != 1 ||
		len(rp.Pending) != 1 || rp.Pending[0].Key != "b@v1" || rp.Pending[0].Execution != 1 {
		t.Fatalf("replay: %v %+v", err, rp)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "live", Execution: 1})
	if err != nil || len(h.Steps) != 1 || len(h.Steps[0].Attempts) != 1 || h.Steps[0].Attempts[0].Execution != 1 || len(h.Pending) != 1 {
		t.Fatalf("steps: %v %+v", err, h)
	}
	// A checkpoint written now goes to the first execution too, and a
	// restart from it keeps the earlier one readable.
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "live", FromKey: "a@v1"}); err != nil {
		t.Fatal(err)
	}
	execs, err := s.ListExecutions(ctx, "live")
	if err != nil || len(execs) != 2 || execs[0].Status != storage.StatusRunning || execs[0].EndedAt == nil ||
		execs[1].ForkedFrom != 1 || execs[1].FromKey != "a@v1" || execs[1].Status != storage.StatusQueued {
		t.Fatalf("executions after restart: %v %+v", err, execs)
	}
}

// TestMigrateCases: a database at schema version 3, with a run waiting on
// an event and attempts in two executions, is upgraded in place: the wait
// has no further cases, the run no deadline or progress, Emit still finds
// it, and the replay reads the current execution's attempts only.
func TestMigrateCases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 3)
	pool := sharedPool(t)
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, status, execution, started_at, wait_key, wait_topic, wait_kind, created_at, updated_at)
			VALUES ('w', 'wf', 'waiting', 2, '2029-05-06 07:08:09Z', 'ev@v1', 'topic', '', '2029-05-06 07:08:09Z', '2029-05-06 07:08:09Z')`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at, ended_at, status) VALUES
			('w', 1, '2029-05-06 07:08:09Z', '2029-05-06 07:08:09Z', 'errored'), ('w', 2, '2029-05-06 07:08:09Z', NULL, NULL)`,
		`INSERT INTO ` + q + `.attempts (run_id, execution, key, number, started, ended, error) VALUES
			('w', 1, 'old@v1', 1, '2029-05-06 07:08:09Z', '2029-05-06 07:08:09Z', 'x'),
			('w', 2, 'new@v1', 1, '2029-05-06 07:08:09Z', '2029-05-06 07:08:09Z', 'y')`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	rec, err := s.GetRun(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if w := rec.Wait; w == nil || w.Key != "ev@v1" || w.Topic != "topic" || w.Also != nil || rec.Deadline != nil || rec.Progress != nil {
		t.Fatalf("run after the migration: %+v (wait %+v)", rec, rec.Wait)
	}
	rp, err := s.LoadReplay(ctx, "w")
	if err != nil || rp.Execution != 2 || len(rp.Pending) != 1 || rp.Pending[0].Key != "new@v1" {
		t.Fatalf("replay: %v %+v", err, rp)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "w", Execution: 1})
	if err != nil || len(h.Pending) != 1 || h.Pending[0].Key != "old@v1" {
		t.Fatalf("steps of execution 1: %v %+v", err, h)
	}
	if ids, err := s.Emit(ctx, storage.EmitRequest{Topic: "topic", Payload: []byte(`1`)}); err != nil || len(ids) != 1 {
		t.Fatalf("Emit after the migration = %v, %v; want the waiting run", ids, err)
	}
	if rec, err := s.GetRun(ctx, "w"); err != nil || rec.Status != storage.StatusQueued || rec.Wait != nil {
		t.Fatalf("run after Emit: %v %+v", err, rec)
	}
}

// TestMigrateQueues: a database at schema version 4, holding a queued, a
// running, a waiting and a finished run and a catalog, is upgraded in
// place: every run is on the default queue without partition at priority
// 0, the queued run is claimed through the new index, QueueStats counts
// them, the finished run is purged, and the catalog's workflow has no
// queue or retention.
func TestMigrateQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 4)
	pool := sharedPool(t)
	const at = `'2020-05-06 07:08:09Z'`
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, status, ready_at, owner, lease_until, token, started_at, ended_at, wait_key, wait_topic, wait_kind, created_at, updated_at) VALUES
			('queued', 'wf', 'queued', ` + at + `, '', NULL, 0, ` + at + `, NULL, NULL, NULL, NULL, ` + at + `, ` + at + `),
			('running', 'wf', 'running', NULL, 'old', now() + interval '1 hour', 1, ` + at + `, NULL, NULL, NULL, NULL, ` + at + `, ` + at + `),
			('waiting', 'wf', 'waiting', NULL, '', NULL, 1, ` + at + `, NULL, 'ev@v1', 'topic', '', ` + at + `, ` + at + `),
			('done', 'wf', 'complete', NULL, '', NULL, 1, ` + at + `, ` + at + `, NULL, NULL, NULL, ` + at + `, ` + at + `)`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at, ended_at, status) VALUES
			('queued', 1, ` + at + `, NULL, NULL), ('running', 1, ` + at + `, NULL, NULL), ('waiting', 1, ` + at + `, NULL, NULL),
			('done', 1, ` + at + `, ` + at + `, 'complete')`,
		`INSERT INTO ` + q + `.checkpoints (run_id, execution, key, kind, output, created_at) VALUES ('done', 1, 'a@v1', 'step', '\x31', ` + at + `)`,
		`INSERT INTO ` + q + `.workflow_types (name, version, worker, updated_at) VALUES ('wf', 1, 'w', ` + at + `)`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	for _, id := range []string{"queued", "running", "waiting", "done"} {
		rec, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Queue != storage.DefaultQueue || rec.Partition != "" || rec.Priority != 0 {
			t.Fatalf("run %s after the migration: queue %q partition %q priority %d", id, rec.Queue, rec.Partition, rec.Priority)
		}
	}
	stats, err := s.QueueStats(ctx, []string{storage.DefaultQueue})
	// The queued run has been ready since 2020, on the database's clock.
	since := time.Since(time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC))
	if err == nil && len(stats) == 1 && stats[0].OldestReady >= since-time.Minute && stats[0].OldestReady <= since+time.Minute {
		stats[0].OldestReady = 0
	}
	if want := (storage.QueueStats{Queue: storage.DefaultQueue, Ready: 1, Running: 1, Waiting: 1}); err != nil || len(stats) != 1 || stats[0] != want {
		t.Fatalf("QueueStats = %+v, %v; want %+v, ready since 2020", stats, err, want)
	}
	if w, err := s.NextWake(ctx, storage.NextWakeRequest{Workflows: []string{"wf"}}); err != nil || !w.Found || w.After != 0 {
		t.Fatalf("NextWake = %+v, %v; want the queued run due", w, err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute,
		Queues: []storage.Queue{{Name: storage.DefaultQueue, Concurrency: 2}}})
	if err != nil || len(got) != 1 || got[0].Lease.RunID != "queued" {
		t.Fatalf("a claim with two places (one held by the running run) = %+v, %v; want the queued run", got, err)
	}
	if got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute}); err != nil || len(got) != 0 {
		t.Fatalf("a claim after it = %+v, %v; want nothing", got, err)
	}
	res, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: time.Now(), Limit: 10})
	if err != nil || res.Runs != 1 {
		t.Fatalf("Purge = %+v, %v; want the finished run", res, err)
	}
	if _, err := s.GetRun(ctx, "done"); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("GetRun of the purged run: %v", err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+q+`.checkpoints) + (SELECT count(*) FROM `+q+`.executions WHERE run_id = 'done')`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("rows of the purged run left: %d, %v", left, err)
	}
	c, err := s.GetCatalog(ctx)
	if err != nil || len(c.Workflows) != 1 || c.Workflows[0].Queue != "" || c.Workflows[0].Retention != nil || len(c.Queues) != 0 {
		t.Fatalf("catalog after the migration: %+v, %v", c, err)
	}
}

// TestMigrateVersions: a database at schema version 5, holding a queued
// run, one at a higher priority, a running one whose lease expired, a
// waiting and a finished run, is upgraded in place: every run reads
// workflow version 0 (unknown), ListRuns finds them all by version 0, a
// worker that does not claim version 0 gets none of them, and one that
// does claims the ready runs and recovers the expired one.
func TestMigrateVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 5)
	pool := sharedPool(t)
	const at = `'2020-05-06 07:08:09Z'`
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, status, ready_at, owner, lease_until, token, started_at, ended_at, wait_key, wait_topic, wait_kind,
				priority, created_at, updated_at) VALUES
			('queued', 'wf', 'queued', ` + at + `, '', NULL, 0, ` + at + `, NULL, NULL, NULL, NULL, 0, ` + at + `, ` + at + `),
			('urgent', 'wf', 'queued', ` + at + `, '', NULL, 0, ` + at + `, NULL, NULL, NULL, NULL, 3, ` + at + `, ` + at + `),
			('expired', 'wf', 'running', NULL, 'old', now() - interval '1 minute', 1, ` + at + `, NULL, NULL, NULL, NULL, 0, ` + at + `, ` + at + `),
			('waiting', 'wf', 'waiting', NULL, '', NULL, 1, ` + at + `, NULL, 'ev@v1', 'topic', '', 0, ` + at + `, ` + at + `),
			('done', 'wf', 'complete', NULL, '', NULL, 1, ` + at + `, ` + at + `, NULL, NULL, NULL, 0, ` + at + `, ` + at + `)`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at, ended_at, status) VALUES
			('queued', 1, ` + at + `, NULL, NULL), ('urgent', 1, ` + at + `, NULL, NULL), ('expired', 1, ` + at + `, NULL, NULL),
			('waiting', 1, ` + at + `, NULL, NULL), ('done', 1, ` + at + `, ` + at + `, 'complete')`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	ids := []string{"done", "expired", "queued", "urgent", "waiting"}
	for _, id := range ids {
		rec, err := s.GetRun(ctx, id)
		if err != nil || rec.Version != 0 {
			t.Fatalf("run %s after the migration: version %d, %v; want 0", id, rec.Version, err)
		}
	}
	page, err := s.ListRuns(ctx, storage.ListRunsQuery{Versions: []int{0}})
	if err != nil || len(page.Runs) != len(ids) {
		t.Fatalf("ListRuns of version 0 = %d runs, %v; want all %d", len(page.Runs), err, len(ids))
	}
	if page, err := s.ListRuns(ctx, storage.ListRunsQuery{Versions: []int{1, 2}}); err != nil || len(page.Runs) != 0 {
		t.Fatalf("ListRuns of versions 1 and 2 = %d runs, %v; want none", len(page.Runs), err)
	}

	newer := map[string][]int{"wf": {2}}
	if w, err := s.NextWake(ctx, storage.NextWakeRequest{Workflows: []string{"wf"}, Versions: newer}); err != nil || w.Found {
		t.Fatalf("NextWake of version 2 = %+v, %v; want nothing", w, err)
	}
	if got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute,
		Versions: newer}); err != nil || len(got) != 0 {
		t.Fatalf("a claim of version 2 = %+v, %v; want nothing", got, err)
	}
	if w, err := s.NextWake(ctx, storage.NextWakeRequest{Workflows: []string{"wf"}, Versions: map[string][]int{"wf": {0, 2}}}); err != nil || !w.Found || w.After != 0 {
		t.Fatalf("NextWake of versions 0 and 2 = %+v, %v; want the ready runs due", w, err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute,
		Versions: map[string][]int{"wf": {0, 2}}})
	if err != nil || len(got) != 3 {
		t.Fatalf("a claim of versions 0 and 2 = %+v, %v; want the three runs ready or expired", got, err)
	}
	for i, id := range []string{"urgent", "expired", "queued"} {
		if c := got[i]; c.Lease.RunID != id || c.Version != 0 {
			t.Fatalf("claimed run %d: %s at version %d; want %s at version 0", i, c.Lease.RunID, c.Version, id)
		}
	}
}

// TestMigrateHeadersWorkers: a database at schema version 6, holding a
// queued run, a running one whose lease expired and a finished one, is
// upgraded in place: every run reads no headers, the claims of the ready
// and the expired run hand over none, QueueStats finds the queued run
// ready since its ReadyAt, a restart of the finished run keeps it without
// headers, and a run created now keeps its own; the store records workers.
func TestMigrateHeadersWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 6)
	pool := sharedPool(t)
	readyAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, status, ready_at, owner, lease_until, token, started_at, ended_at, version, created_at, updated_at) VALUES
			('queued', 'wf', 'queued', $1, '', NULL, 0, $1, NULL, 2, $1, $1),
			('expired', 'wf', 'running', NULL, 'old', now() - interval '1 minute', 1, $1, NULL, 0, $1, $1),
			('done', 'wf', 'complete', NULL, '', NULL, 1, $1, $1, 0, $1, $1)`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at, ended_at, status) VALUES
			('queued', 1, $1, NULL, NULL), ('expired', 1, $1, NULL, NULL), ('done', 1, $1, $1, 'complete')`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql, readyAt); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	for _, id := range []string{"queued", "expired", "done"} {
		if rec, err := s.GetRun(ctx, id); err != nil || rec.Headers != nil {
			t.Fatalf("run %s after the migration: headers %q, %v; want none", id, rec.Headers, err)
		}
	}
	stats, err := s.QueueStats(ctx, []string{storage.DefaultQueue})
	if err != nil || len(stats) != 1 || stats[0].Ready != 1 || stats[0].Running != 1 || stats[0].OldestReady < time.Hour {
		t.Fatalf("QueueStats = %+v, %v; want the queued run ready for an hour or more", stats, err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(got) != 2 {
		t.Fatalf("a claim = %+v, %v; want the queued run and the expired one", got, err)
	}
	for _, c := range got {
		if c.Headers != nil {
			t.Fatalf("the claim of %s hands over headers %q; want none", c.Lease.RunID, c.Headers)
		}
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "done"}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.GetRun(ctx, "done"); err != nil || rec.Headers != nil || rec.Status != storage.StatusQueued {
		t.Fatalf("the restarted run: %+v, %v; want queued without headers", rec, err)
	}
	h := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "traced", Workflow: "wf", Headers: h}}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.GetRun(ctx, "traced"); err != nil || !maps.Equal(rec.Headers, h) {
		t.Fatalf("a run created after the migration: headers %q, %v; want %q", rec.Headers, err, h)
	}
	w := storage.Worker{ID: "w-1", Host: "host", PID: 1, StartedAt: readyAt, Queues: []string{storage.DefaultQueue}}
	if err := s.PutWorker(ctx, storage.PutWorkerRequest{Worker: w, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if ws, err := s.ListWorkers(ctx); err != nil || len(ws) != 1 || ws[0].ID != "w-1" || !ws[0].StartedAt.Equal(readyAt) {
		t.Fatalf("ListWorkers = %+v, %v; want w-1", ws, err)
	}
}

// TestMigrateHolds: a database at schema version 8, holding a queued run
// and one waiting on an event, is upgraded in place: neither is held; each
// can then be held, the hold stored as JSON text beside the run and read
// by GetRun and ListRuns, the waiting run's wait kept, and the next claim
// of each clears it.
func TestMigrateHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 8)
	pool := sharedPool(t)
	readyAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, status, ready_at, wait_key, wait_topic, wait_kind, wait_deadline, owner, token,
				started_at, first_claimed_at, created_at, updated_at) VALUES
			('queued', 'wf', 'queued', $1, NULL, NULL, NULL, NULL, '', 0, $1, NULL, $1, $1),
			('waiting', 'wf', 'waiting', $1, 'ship', 'ship.ready', 'event', $1, 'old', 1, $1, $1, $1, $1)`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at) VALUES ('queued', 1, $1), ('waiting', 1, $1)`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql, readyAt); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	page, err := s.ListRuns(ctx, storage.ListRunsQuery{})
	if err != nil || len(page.Runs) != 2 {
		t.Fatalf("ListRuns = %+v, %v; want the two runs", page, err)
	}
	for _, r := range page.Runs {
		if r.Hold != nil {
			t.Fatalf("run %s after the migration: held (%+v); want no hold", r.ID, r.Hold)
		}
	}
	claim := func() []storage.ClaimedRun {
		t.Helper()
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
		if err != nil || len(got) != 2 {
			t.Fatalf("a claim = %+v, %v; want the two runs", got, err)
		}
		return got
	}
	since := time.Now().UTC().Truncate(time.Microsecond)
	held := &storage.Hold{Reason: "the code called b@v1 where the history has a@v1\x00", Recorded: "a@v1", Called: "b@v1",
		Position: 1, Execution: 1, Since: since}
	for _, c := range claim() {
		if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: c.Lease, ReadyAt: &readyAt, SuspendState: []byte(`{}`), Hold: held}); err != nil {
			t.Fatal(err)
		}
	}
	page, err = s.ListRuns(ctx, storage.ListRunsQuery{})
	if err != nil || len(page.Runs) != 2 {
		t.Fatalf("ListRuns of the held runs = %+v, %v", page, err)
	}
	for _, r := range page.Runs {
		if r.Hold == nil || r.Hold.Reason != held.Reason || r.Hold.Called != "b@v1" || !r.Hold.Since.Equal(since) {
			t.Fatalf("run %s: hold %+v; want %+v", r.ID, r.Hold, held)
		}
		if r.ID == "waiting" && (r.Wait == nil || r.Wait.Key != "ship" || r.Wait.Topic != "ship.ready") {
			t.Fatalf("the held run's wait = %+v; want ship on ship.ready kept", r.Wait)
		}
	}
	// Text, which keeps the NUL of the reason escaped, where jsonb would
	// refuse it.
	var stored string
	if err := pool.QueryRow(ctx, `SELECT hold FROM `+q+`.runs WHERE id = 'queued'`).Scan(&stored); err != nil ||
		!strings.Contains(stored, `"called":"b@v1"`) || !strings.Contains(stored, `\u0000`) {
		t.Fatalf("the stored hold = %q, %v; want JSON text with the call and the reason's NUL escaped", stored, err)
	}

	claim()
	for _, id := range []string{"queued", "waiting"} {
		if rec, err := s.GetRun(ctx, id); err != nil || rec.Hold != nil {
			t.Fatalf("run %s after its claim: hold %+v, %v; want none", id, rec.Hold, err)
		}
	}
}

// TestMigrateCancel: a database at schema version 9, holding a queued run
// and one waiting on an event, is upgraded in place: neither has a
// cancellation requested; the waiting one, cancelled, becomes queued with
// its wait kept, its claim reports the request, stored as the reason
// beside the run, and a Restart clears it.
func TestMigrateCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 9)
	pool := sharedPool(t)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, status, ready_at, wait_key, wait_topic, wait_kind, owner, token,
				started_at, first_claimed_at, created_at, updated_at) VALUES
			('queued', 'wf', 'queued', $1, NULL, NULL, NULL, '', 0, $1, NULL, $1, $1),
			('waiting', 'wf', 'waiting', NULL, 'ship', 'ship.ready', 'event', 'old', 1, $1, $1, $1, $1)`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at) VALUES ('queued', 1, $1), ('waiting', 1, $1)`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql, at); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	page, err := s.ListRuns(ctx, storage.ListRunsQuery{})
	if err != nil || len(page.Runs) != 2 {
		t.Fatalf("ListRuns = %+v, %v; want the two runs", page, err)
	}
	for _, r := range page.Runs {
		if r.CancelRequested || r.CancelReason != "" {
			t.Fatalf("run %s after the migration: cancelled (%q); want no request", r.ID, r.CancelReason)
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
	if err := pool.QueryRow(ctx, `SELECT cancel_reason FROM `+q+`.runs WHERE id = 'waiting'`).Scan(&stored); err != nil || stored != "no longer needed" {
		t.Fatalf("the stored reason = %q, %v", stored, err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 || got[0].Lease.RunID != "waiting" || !got[0].CancelRequested || got[0].CancelReason != "no longer needed" {
		t.Fatalf("a claim = %+v, %v; want the cancelled run with its request", got, err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "waiting"}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.GetRun(ctx, "waiting"); err != nil || rec.CancelRequested || rec.CancelReason != "" {
		t.Fatalf("GetRun(waiting) after Restart = %+v, %v; want no request", rec, err)
	}
}

// TestMigrateStartKeys: a database at schema version 12, holding a queued
// run, is upgraded in place: a create with a start key makes a run that
// holds it and a second create joins it; the old run is replaced by a
// create that takes the key's record over; and a purge of the holder
// deletes its record, so the key is free again.
func TestMigrateStartKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 12)
	pool := sharedPool(t)
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, status, ready_at, started_at, created_at, updated_at)
			VALUES ('old', 'wf', 'queued', $1, $1, $1, $1)`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at) VALUES ('old', 1, $1)`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql, at); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	key := &storage.StartKey{Key: "k"}
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "a", Workflow: "wf", Key: key}, {ID: "b", Workflow: "wf", Key: key}})
	if err != nil || !res[0].Created || !res[1].Joined || res[1].Run.ID != "a" {
		t.Fatalf("keyed creates after the migration = %+v, %v; want a created and b joined", res, err)
	}
	res, err = s.CreateRuns(ctx, []storage.NewRun{{ID: "old", Workflow: "wf", Input: []byte("new"), OnExisting: storage.ExistingReplace,
		Replace: &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}}}})
	if err != nil || !res[0].Replaced || res[0].ReplacedStatus != storage.StatusQueued || string(res[0].Run.Input) != "new" {
		t.Fatalf("a replace of the migrated run = %+v, %v", res, err)
	}
	if _, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "a", Error: storage.ErrorInfo{Message: "done"}}); err != nil {
		t.Fatal(err)
	}
	if pr, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: time.Now().Add(time.Hour), Limit: 10}); err != nil || pr.Runs != 1 {
		t.Fatalf("Purge = %+v, %v; want a deleted", pr, err)
	}
	var records int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+q+`.start_keys`).Scan(&records); err != nil || records != 0 {
		t.Fatalf("start-key records after the purge of their holder: %d, %v; want none", records, err)
	}
	res, err = s.CreateRuns(ctx, []storage.NewRun{{ID: "c", Workflow: "wf", Key: key}})
	if err != nil || !res[0].Created {
		t.Fatalf("a keyed create after the purge = %+v, %v; want created", res, err)
	}
}

// TestMigrateRunTokens: a database at schema version 13, holding a running
// parent with children claimed twice (running), claimed once (ended) and
// never claimed, is upgraded in place: a replacement of the parent keeps
// the tokens of the two claimed children by ID, and the runs created later
// under their IDs go on from them, plain or leased at creation, so that
// the deleted child's holder is fenced from the new one; the child never
// claimed leaves nothing, its ID starts again at 0, and every kept token
// is gone once its ID is taken again.
func TestMigrateRunTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 13)
	pool := sharedPool(t)
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, parent_id, status, ready_at, ended_at, owner, lease_until, token,
				started_at, first_claimed_at, created_at, updated_at) VALUES
			('p', 'wf', '', 'running', NULL, NULL, 'w', now() + interval '1 hour', 1, $1, $1, $1, $1),
			('p/c', 'child', 'p', 'running', NULL, NULL, 'w', now() + interval '1 hour', 2, $1, $1, $1, $1),
			('p/d', 'child', 'p', 'complete', NULL, $1, '', NULL, 1, $1, $1, $1, $1),
			('p/e', 'child', 'p', 'queued', $1, NULL, '', NULL, 0, $1, NULL, $1, $1)`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at) VALUES ('p', 1, $1), ('p/c', 1, $1), ('p/d', 1, $1), ('p/e', 1, $1)`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql, at); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "p", Workflow: "wf", OnExisting: storage.ExistingReplace,
		Replace: &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}, ChildError: storage.ErrorInfo{Message: "parent replaced"}}}})
	if err != nil || !res[0].Replaced || res[0].Run.Token != 1 {
		t.Fatalf("a replace of the migrated parent = %+v, %v; want replaced, keeping token 1", res, err)
	}
	kept := func() map[string]int64 {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT id, token FROM `+q+`.run_tokens`)
		if err != nil {
			t.Fatal(err)
		}
		m := make(map[string]int64)
		for rows.Next() {
			var id string
			var token int64
			if err := rows.Scan(&id, &token); err != nil {
				t.Fatal(err)
			}
			m[id] = token
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got, want := kept(), map[string]int64{"p/c": 2, "p/d": 1}; !maps.Equal(got, want) {
		t.Fatalf("tokens kept by the replacement: %v, want %v", got, want)
	}

	res, err = s.CreateRuns(ctx, []storage.NewRun{
		{ID: "p/c", Workflow: "child", ParentID: "p"},
		{ID: "p/d", Workflow: "child", ParentID: "p", Lease: &storage.EagerLease{Owner: "w", For: time.Minute}},
		{ID: "p/e", Workflow: "child", ParentID: "p"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{2, 2, 0} {
		if r := res[i]; !r.Created || r.Run.Token != want {
			t.Fatalf("the new child %d: %+v; want created with token %d", i, r, want)
		}
	}
	if got := kept(); len(got) != 0 {
		t.Fatalf("tokens kept once their IDs were taken again: %v, want none", got)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"child"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil || len(got) != 2 {
		t.Fatalf("a claim of the children = %+v, %v; want p/c and p/e", got, err)
	}
	tokens := map[string]int64{}
	for _, c := range got {
		tokens[c.Lease.RunID] = c.Lease.Token
	}
	if want := map[string]int64{"p/c": 3, "p/e": 1}; !maps.Equal(tokens, want) {
		t.Fatalf("the children's claims have tokens %v, want %v", tokens, want)
	}
	stale := storage.Lease{RunID: "p/c", Owner: "w", Token: 2}
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: stale, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "stale@v1", Kind: storage.KindStep}}); !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("a checkpoint by the deleted child's holder = %v, want ErrLeaseLost", err)
	}
}

// TestMigrateUpdatesStreams: a database at schema version 14, holding a
// running run with a buffered event and a run waiting on an update's
// topic, is upgraded in place: the waiting run takes an update at once,
// the running one buffers it behind its event, replies to it and appends
// to a stream with a checkpoint, and its updates and streams go with it
// when it is purged.
func TestMigrateUpdatesStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 14)
	pool := sharedPool(t)
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, status, ready_at, owner, lease_until, token, wait_key, wait_topic, wait_kind,
				started_at, first_claimed_at, created_at, updated_at) VALUES
			('busy', 'wf', 'running', NULL, 'w', now() + interval '1 hour', 1, NULL, NULL, NULL, $1, $1, $1, $1),
			('idle', 'wf', 'waiting', NULL, '', NULL, 1, 'ask@v1', '` + storage.UpdateTopic("ask") + `', 'update', $1, $1, $1, $1)`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at) VALUES ('busy', 1, $1), ('idle', 1, $1)`,
		`INSERT INTO ` + q + `.events (run_id, topic, payload, created_at) VALUES ('busy', 'other', 'x', $1)`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql, at); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	res, err := s.SendUpdate(ctx, storage.UpdateRequest{RunID: "idle", ID: "u", Name: "ask", Payload: []byte(`1`)})
	if err != nil || !res.Created || !res.Delivered || res.Update.Seq != 1 {
		t.Fatalf("an update of the waiting run = %+v, %v; want created and delivered", res, err)
	}
	if rec, err := s.GetRun(ctx, "idle"); err != nil || rec.Status != storage.StatusQueued {
		t.Fatalf("the waiting run after its update: %+v, %v; want queued", rec, err)
	}
	res, err = s.SendUpdate(ctx, storage.UpdateRequest{RunID: "busy", ID: "u", Name: "ask", Payload: []byte(`2`)})
	if err != nil || !res.Created || res.Delivered {
		t.Fatalf("an update of the running run = %+v, %v; want created and buffered", res, err)
	}
	var buffered []string
	rows, err := pool.Query(ctx, `SELECT topic FROM `+q+`.events WHERE run_id = 'busy' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var topic string
		if err := rows.Scan(&topic); err != nil {
			t.Fatal(err)
		}
		buffered = append(buffered, topic)
	}
	if err := rows.Err(); err != nil || len(buffered) != 2 || buffered[1] != storage.UpdateTopic("ask") {
		t.Fatalf("buffered events of the running run: %q, %v; want its event, then the update", buffered, err)
	}
	lease := storage.Lease{RunID: "busy", Owner: "w", Token: 1}
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "reply@v1", Kind: storage.KindReply},
		Reply:      &storage.UpdateReply{ID: "u", Output: []byte(`"ok"`)},
		Streams:    []storage.StreamWrite{{Stream: "out", Values: [][]byte{[]byte("v")}, Close: true}}}); err != nil {
		t.Fatal(err)
	}
	if u, err := s.GetUpdate(ctx, "busy", "u"); err != nil || u.State != storage.UpdateReplied || string(u.Reply) != `"ok"` {
		t.Fatalf("the update replied to: %+v, %v", u, err)
	}
	page, err := s.ReadStream(ctx, storage.StreamQuery{RunID: "busy", Stream: "out"})
	if err != nil || len(page.Values) != 1 || page.Length != 1 || !page.Closed || page.RunStatus != storage.StatusRunning {
		t.Fatalf("the stream: %+v, %v", page, err)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	if pr, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: time.Now().Add(time.Hour), Limit: 10}); err != nil || pr.Runs != 1 {
		t.Fatalf("Purge = %+v, %v; want busy deleted", pr, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+q+`.updates WHERE run_id = 'busy') +
		(SELECT count(*) FROM `+q+`.streams) + (SELECT count(*) FROM `+q+`.stream_values)`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("rows of the purged run's updates and streams: %d, %v; want none", left, err)
	}
}

// TestMigrateAttributes: a database at schema version 15, holding runs,
// a checkpoint and a workflow type, is upgraded in place: the runs have
// no attributes, the checkpoint no input, the workflow no declared
// attributes; the runs list by creation time, a checkpoint of a run stored
// before sets its attributes, which a listing then finds, and Purge
// deletes them with the run.
func TestMigrateAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 15)
	pool := sharedPool(t)
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	setup := []string{
		`INSERT INTO ` + q + `.runs (id, workflow, status, ready_at, owner, lease_until, token, started_at, first_claimed_at, created_at, updated_at) VALUES
			('old', 'wf', 'running', NULL, 'w', now() + interval '1 hour', 1, $1, $1, $1, $1),
			('older', 'wf', 'queued', $1, '', NULL, 0, $1, NULL, $1::timestamptz - interval '1 minute', $1)`,
		`INSERT INTO ` + q + `.executions (run_id, number, started_at) VALUES ('old', 1, $1), ('older', 1, $1)`,
		`INSERT INTO ` + q + `.checkpoints (run_id, execution, key, kind, output, created_at) VALUES ('old', 1, 'a@v1', 'step', '\x31', $1)`,
		`INSERT INTO ` + q + `.workflow_types (name, version, worker, updated_at) VALUES ('wf', 1, 'w', $1)`,
	}
	for _, sql := range setup {
		if _, err := pool.Exec(ctx, sql, at); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	s := newTestStore(t, Options{Schema: schema})
	if rec, err := s.GetRun(ctx, "old"); err != nil || rec.Attributes != nil {
		t.Fatalf("a run stored before: %+v, %v", rec.Attributes, err)
	}
	if h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "old"}); err != nil || len(h.Steps) != 1 || h.Steps[0].Input != nil {
		t.Fatalf("a checkpoint stored before: %+v, %v", h, err)
	}
	if c, err := s.GetCatalog(ctx); err != nil || len(c.Workflows) != 1 || c.Workflows[0].Attributes != nil {
		t.Fatalf("a workflow recorded before: %+v, %v", c, err)
	}
	page, err := s.ListRuns(ctx, storage.ListRunsQuery{Order: storage.OrderCreated})
	if err != nil || len(page.Runs) != 2 || page.Runs[0].ID != "older" || page.Runs[1].ID != "old" {
		t.Fatalf("by creation time: %+v, %v", page, err)
	}
	lease := storage.Lease{RunID: "old", Owner: "w", Token: 1}
	set := []storage.Attr{storage.StringAttr("customer", "c-1")}
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: lease, LeaseFor: time.Minute, Attributes: set,
		Checkpoint: storage.Checkpoint{Key: "set@v1", Kind: storage.KindAttr, Input: []byte(`"c-1"`)}}); err != nil {
		t.Fatal(err)
	}
	where := []storage.AttrFilter{{Op: storage.OpEq, Value: set[0]}}
	page, err = s.ListRuns(ctx, storage.ListRunsQuery{Where: where, Order: storage.OrderCreated})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != "old" || !page.Runs[0].CreatedAt.Equal(at) || !sameAttrs(page.Runs[0].Attributes, set) {
		t.Fatalf("by the attribute set: %+v, %v", page, err)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	if pr, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: time.Now().Add(time.Hour), Limit: 10}); err != nil || pr.Runs != 1 {
		t.Fatalf("Purge = %+v, %v; want old deleted", pr, err)
	}
	if page, err := s.ListRuns(ctx, storage.ListRunsQuery{Where: where}); err != nil || len(page.Runs) != 0 || attrRowCount(t, s, "old") != 0 {
		t.Fatalf("after the purge: %+v, %v", page, err)
	}
}
