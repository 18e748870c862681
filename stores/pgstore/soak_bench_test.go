package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/benchwork"
	"github.com/stemflow/stem/internal/testserver"
)

// BenchmarkSoak runs steady load (32 runs in flight, each started and
// awaited by its own goroutine) with a one-minute retention on a private
// server with Postgres's default settings (autovacuum on, as in
// production; the shared test server has it off), and reports the size of
// the store's tables with their indexes and TOAST and the process's RSS
// once the first minute's runs are due for deletion and at the end: they
// stay flat. It runs $STEM_SOAK long (default 3m; the README's figure is
// 10m):
//
//	STEM_SOAK=10m go test -run '^$' -bench BenchmarkSoak -benchtime 1x -timeout 20m ./stores/pgstore
func BenchmarkSoak(b *testing.B) {
	srv := testserver.Postgres(b)
	schema := "soak"
	s, err := Open(context.Background(), srv.URL(), Options{Schema: schema, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	size := func() (int64, error) {
		var n int64
		err := s.pool.QueryRow(context.Background(), `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
WHERE ns.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&n)
		return n, err
	}
	benchwork.Soak(b, s, 32, time.Minute, size)
}
