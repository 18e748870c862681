package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// seedMillion fills the store's schema with n runs by bulk SQL: rows of
// runs, of their first executions and of their attributes, as the
// store's own creates and completions leave them, so that the store lists
// them as any others. IDs are hashes (their order is not creation order);
// runs were created 2.5 s apart over the last month (n = 1 000 000), 90%
// complete, 5% errored, 5% queued, of four workflows, every tenth a
// child; each has two attributes: customer, one of 10 000 values (c-0 to
// c-9999, n/10 000 runs each, spread over the whole month), and total, a
// number from 0 to 999.99. The tables are then vacuumed and analyzed.
func seedMillion(b *testing.B, s *Store, n int) {
	b.Helper()
	ctx := context.Background()
	pool := sharedPool(b) // no call timeout: the inserts take minutes
	start := time.Now()
	base := start.Add(-time.Duration(n) * 2500 * time.Millisecond).Truncate(time.Microsecond)
	const chunk = 250000
	for from := 1; from <= n; from += chunk {
		to := min(from+chunk-1, n)
		for _, sql := range []string{
			`INSERT INTO {s}.runs (id, workflow, parent_id, status, input, ready_at, started_at, ended_at, created_at, updated_at)
SELECT md5(g::text), 'wf-' || g % 4, CASE WHEN g % 10 = 9 THEN md5((g - 9)::text) ELSE '' END,
	CASE WHEN g % 100 < 90 THEN 'complete' WHEN g % 100 < 95 THEN 'errored' ELSE 'queued' END,
	convert_to('{"order":' || g || ',"note":"an input of typical size"}', 'UTF8'),
	CASE WHEN g % 100 >= 95 THEN t END, t, CASE WHEN g % 100 < 95 THEN t + interval '1 second' END, t, t
FROM generate_series($1::int, $2::int) g, LATERAL (SELECT $3::timestamptz + g * interval '2.5 seconds' AS t) x`,
			`INSERT INTO {s}.executions (run_id, number, started_at, ended_at, status)
SELECT md5(g::text), 1, $3::timestamptz + g * interval '2.5 seconds',
	CASE WHEN g % 100 < 95 THEN $3::timestamptz + g * interval '2.5 seconds' + interval '1 second' END,
	CASE WHEN g % 100 < 90 THEN 'complete' WHEN g % 100 < 95 THEN 'errored' END
FROM generate_series($1::int, $2::int) g`,
			`INSERT INTO {s}.run_attrs (run_id, name, str, num, created_at)
SELECT md5(g::text), a.name, a.str, a.num, $3::timestamptz + g * interval '2.5 seconds'
FROM generate_series($1::int, $2::int) g, LATERAL (VALUES
	('customer', 'c-' || (g::bigint * 7919) % 10000, NULL::float8),
	('total', NULL, ((g::bigint * 31) % 100000) / 100.0)) a(name, str, num)`,
		} {
			if _, err := pool.Exec(ctx, strings.ReplaceAll(sql, "{s}", s.schema), from, to, base); err != nil {
				b.Fatalf("%s: %v", sql, err)
			}
		}
	}
	// As autovacuum leaves a store a month old: statistics, and the
	// visibility map that lets a scan of run_attrs_str_idx skip the
	// table (without it, it reads each run's attribute row too).
	for _, table := range []string{"runs", "executions", "run_attrs"} {
		if _, err := pool.Exec(ctx, `VACUUM ANALYZE `+s.schema+`.`+table); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("seeded %d runs with 2 attributes each in %v", n, time.Since(start).Round(time.Second))
}

// explainAnalyze returns the plan of q's statement as EXPLAIN (ANALYZE,
// BUFFERS) reports it.
func explainAnalyze(b *testing.B, s *Store, q storage.ListRunsQuery) string {
	b.Helper()
	sql, args := s.listRunsSQL(q)
	rows, err := s.pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			b.Fatal(err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// BenchmarkListByAttribute1M lists runs by a search attribute among
// 1 000 000 runs (seedMillion, in a schema of its own, dropped after):
// a page of the 100 newest runs of one customer of 10 000, a different
// customer each time, read through run_attrs_str_idx (no sort); for
// comparison, the same with a second filter, the 100 newest runs of all,
// and a range of totals (1% of the runs, sorted). Each logs its plan as
// EXPLAIN (ANALYZE, BUFFERS) reports it. It runs only with -bench:
//
//	STEM_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -bench ListByAttribute1M -benchtime 2000x ./stores/pgstore
func BenchmarkListByAttribute1M(b *testing.B) {
	testURL(b)
	ctx := context.Background()
	s := benchStore(b)
	defer s.Close()
	const n = 1000000
	seedMillion(b, s, n)
	customer := func(i int) storage.AttrFilter {
		return storage.AttrFilter{Op: storage.OpEq, Value: storage.StringAttr("customer", fmt.Sprintf("c-%d", (i*37)%10000))}
	}
	for _, c := range []struct {
		name string
		q    func(i int) storage.ListRunsQuery
		want int
	}{
		{"where=customer,order=created,desc,limit=100", func(i int) storage.ListRunsQuery {
			return storage.ListRunsQuery{Where: []storage.AttrFilter{customer(i)}}
		}, 100},
		{"where=customer+total>=500,order=created,desc,limit=100", func(i int) storage.ListRunsQuery {
			return storage.ListRunsQuery{Where: []storage.AttrFilter{customer(i), {Op: storage.OpGe, Value: storage.NumberAttr("total", 500)}}}
		}, 0},
		{"order=created,desc,limit=100", func(int) storage.ListRunsQuery { return storage.ListRunsQuery{} }, 100},
		{"where=total>=990,order=created,desc,limit=100", func(int) storage.ListRunsQuery {
			return storage.ListRunsQuery{Where: []storage.AttrFilter{{Op: storage.OpGe, Value: storage.NumberAttr("total", 990)}}}
		}, 100},
	} {
		q := func(i int) storage.ListRunsQuery {
			q := c.q(i)
			q.Order, q.Descending, q.Limit = storage.OrderCreated, true, 100
			return q
		}
		b.Run(c.name, func(b *testing.B) {
			b.Logf("EXPLAIN (ANALYZE, BUFFERS) of %v:\n%s", q(1).Where, explainAnalyze(b, s, q(1)))
			i := 0
			for b.Loop() {
				i++
				page, err := s.ListRuns(ctx, q(i))
				if err != nil || c.want > 0 && len(page.Runs) != c.want || len(page.Runs) == 0 {
					b.Fatalf("ListRuns(%+v) = %d runs, %v; want %d", q(i), len(page.Runs), err, c.want)
				}
			}
		})
	}
}
