package sqlitestore

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// BenchmarkListByAttribute1M measures a listing filtered by a search
// attribute on a store of 1 000 000 runs: the page of (up to) 100 newest
// runs of one customer (customer = one of 10 000 values, about 100 runs
// each), the store's answer to "this customer's orders". Beside it, for
// scale: the 100 newest runs of the tier "gold", which 100 000 runs have
// (the page's end stops the read), the 100 newest runs of all, and a
// page of a range of totals in creation order, whose matches (about
// 1 000) are sorted.
//
// Each run has a customer (string) and a total (number, 0 to 999.99),
// one in ten a tier (string) too; the runs were
// created over 30 days, eight at each instant as a batch start makes
// them, with UUIDv7-like IDs, 2 in 10 of them still queued. The store is
// seeded once per run of the benchmark, before its sub-benchmarks, under
// b.TempDir(), by SQL inserts in one transaction on a connection of its
// own (the rows CreateRuns writes: runs, run_data, executions,
// run_attrs; the triggers keeping run_counts fire), and then opened as
// any store is: nothing is cached across runs of the benchmark, and the
// listings are ListRuns calls on the store. It logs the seeding time, the
// first call's time (the read connection's page cache cold) and the plan
// of each listing's statement, and reports the process's CPU time per
// listing beside its time (cpu-ns/op), which other work on the machine
// disturbs less. Run it with
//
//	go test -run '^$' -bench BenchmarkListByAttribute1M -benchtime 2000x ./stores/sqlitestore
func BenchmarkListByAttribute1M(b *testing.B) {
	const runs, customers = 1_000_000, 10_000
	path := filepath.Join(b.TempDir(), "attrs.db")
	seedAttrs(b, path, runs, customers)
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	eq := func(name, v string) []storage.AttrFilter {
		return []storage.AttrFilter{{Op: storage.OpEq, Value: storage.StringAttr(name, v)}}
	}
	for _, c := range []struct {
		name string
		q    storage.ListRunsQuery
		want int
	}{
		{"customer=C-04711/newest", storage.ListRunsQuery{Where: eq("customer", "C-04711"), Order: storage.OrderCreated, Descending: true, Limit: 100}, -1},
		{"tier=gold/newest", storage.ListRunsQuery{Where: eq("tier", "gold"), Order: storage.OrderCreated, Descending: true, Limit: 100}, 100},
		{"created/newest", storage.ListRunsQuery{Order: storage.OrderCreated, Descending: true, Limit: 100}, 100},
		{"total-range/newest", storage.ListRunsQuery{Where: []storage.AttrFilter{
			{Op: storage.OpGe, Value: storage.NumberAttr("total", 500)}, {Op: storage.OpLt, Value: storage.NumberAttr("total", 501)},
		}, Order: storage.OrderCreated, Descending: true, Limit: 100}, 100},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			query, args := listQuery(c.q, c.q.PageSize()+1, false)
			b.Logf("plan:\n\t%s", strings.Join(queryPlan(b, s, query, args...), "\n\t"))
			start := time.Now()
			page, err := s.ListRuns(ctx, c.q)
			if err != nil || len(page.Runs) == 0 || c.want > 0 && len(page.Runs) != c.want {
				b.Fatalf("ListRuns(%+v) = %d runs, %v; want %d", c.q, len(page.Runs), err, c.want)
			}
			c.want = len(page.Runs)
			b.Logf("first call: %v, %d runs", time.Since(start), len(page.Runs))
			for i := 1; i < len(page.Runs); i++ {
				if page.Runs[i].CreatedAt.After(page.Runs[i-1].CreatedAt) || !c.q.Listed(&page.Runs[i]) {
					b.Fatalf("run %d of the page (%s) is out of order or does not pass the filter", i, page.Runs[i].ID)
				}
			}
			cpu := cpuTime()
			for b.Loop() {
				page, err := s.ListRuns(ctx, c.q)
				if err != nil || len(page.Runs) != c.want {
					b.Fatalf("ListRuns(%+v) = %d runs, %v; want %d", c.q, len(page.Runs), err, c.want)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// seedAttrs writes n runs into a new store at path, in one transaction of
// a connection of its own, as BenchmarkListByAttribute1M describes them:
// each belongs to one of customers values C-00000, C-00001, ...
func seedAttrs(b *testing.B, path string, n, customers int) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	s, err := Open(path, Options{}) // creates the schema
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	// A connection with no journal to keep and a large cache: seeding
	// is not what is measured.
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(DELETE)&_pragma=synchronous(OFF)&_pragma=cache_size(-1048576)&_pragma=foreign_keys(1)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	// Eight runs per instant, 30 days for the million: an instant every
	// 20.736 ms.
	step := int64(30*24*time.Hour) / int64(n/8)
	type stmt struct {
		q    string
		args []any
	}
	statements := []stmt{
		{`CREATE TEMP TABLE seed (i INTEGER PRIMARY KEY, id TEXT NOT NULL, created INTEGER NOT NULL, customer TEXT NOT NULL, total REAL NOT NULL)`, nil},
		// UUIDv7-like IDs: the creation's milliseconds, then random.
		{`WITH RECURSIVE k (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?1)
		INSERT INTO seed (i, id, created, customer, total)
		SELECT i, printf('%08x-%04x-7%03x-%s', c / 1000000 / 65536, (c / 1000000) % 65536, abs(random()) % 4096, lower(hex(randomblob(8)))),
			c, printf('C-%05d', abs(random()) % ?2), (abs(random()) % 100000) / 100.0
		FROM (SELECT i, ?3 + ((i - 1) / 8) * ?4 AS c FROM k)`, []any{n, customers, base, step}},
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at, ended_at, token, first_claimed_at)
		SELECT i, id, 'orders.fulfil', iif(i % 10 < 2, 'queued', 'complete'), iif(i % 10 < 2, created, NULL), created, created + 1000000,
			iif(i % 10 < 2, NULL, created + 1000000), iif(i % 10 < 2, 0, 1), iif(i % 10 < 2, NULL, created)
		FROM seed ORDER BY i`, nil},
		{`INSERT INTO run_data (ref, input, output) SELECT i, CAST('{"order":' || i || ',"customer":"' || customer || '"}' AS BLOB),
			iif(i % 10 < 2, NULL, CAST('{"receipt":' || i || '}' AS BLOB)) FROM seed ORDER BY i`, nil},
		{`INSERT INTO executions (run_ref, number, started_at, ended_at, status)
		SELECT i, 1, created, iif(i % 10 < 2, NULL, created + 1000000), iif(i % 10 < 2, NULL, 'complete') FROM seed ORDER BY i`, nil},
		{`INSERT INTO run_attrs (run_ref, name, str_value, created_us, run_id) SELECT i, 'customer', customer, created / 1000, id FROM seed ORDER BY i`, nil},
		{`INSERT INTO run_attrs (run_ref, name, num_value, created_us, run_id) SELECT i, 'total', total, created / 1000, id FROM seed ORDER BY i`, nil},
		{`INSERT INTO run_attrs (run_ref, name, str_value, created_us, run_id) SELECT i, 'tier', 'gold', created / 1000, id FROM seed WHERE i % 10 = 5 ORDER BY i`, nil},
		{`DROP TABLE seed`, nil},
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	for _, st := range statements {
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			b.Fatalf("%s: %v", st.q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	var size int64
	if err := db.QueryRowContext(ctx, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&size); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d runs (%d MiB) in %v", n, size>>20, time.Since(start).Round(time.Millisecond))
}
