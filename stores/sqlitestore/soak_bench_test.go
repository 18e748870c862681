package sqlitestore_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/benchwork"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// BenchmarkSoak runs steady load (32 runs in flight, each started and
// awaited by its own goroutine) with a one-minute retention, and reports
// the SQLite file's size (with its WAL) and the process's RSS once the
// first minute's runs are due for deletion and at the end: they stay flat.
// It runs $STEM_SOAK long (default 3m; the figure in the README is 10m):
//
//	STEM_SOAK=10m go test -run '^$' -bench BenchmarkSoak -benchtime 1x -timeout 20m ./stores/sqlitestore
func BenchmarkSoak(b *testing.B) {
	path := filepath.Join(b.TempDir(), "soak.db")
	s, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	size := func() (int64, error) {
		var total int64
		for _, p := range []string{path, path + "-wal"} {
			fi, err := os.Stat(p)
			if err != nil && !os.IsNotExist(err) {
				return 0, err
			}
			if err == nil {
				total += fi.Size()
			}
		}
		return total, nil
	}
	benchwork.Soak(b, s, 32, time.Minute, size)
}
