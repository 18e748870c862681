package sqlitestore_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/stores/storetest"
)

// TestConformance runs the conformance suite, each case on a fresh database
// file. After each case the counts CountRuns reads (run_counts, kept by
// triggers) must be those of the runs stored, whatever the case did to
// them.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
		path := filepath.Join(t.TempDir(), "stem.db")
		s, err := sqlitestore.Open(path, sqlitestore.Options{Clock: clock})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { checkRunCounts(t, path) })
		return s
	})
}

// checkRunCounts fails t unless the counts of run_counts in the database
// at path are those of its runs, by workflow and status, none negative.
func checkRunCounts(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := func(query string) []string {
		t.Helper()
		rs, err := db.Query(query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rs.Close()
		var out []string
		for rs.Next() {
			var workflow, status string
			var n int64
			if err := rs.Scan(&workflow, &status, &n); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s/%s=%d", workflow, status, n))
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	kept := rows(`SELECT workflow, status, n FROM run_counts WHERE n <> 0 ORDER BY 1, 2`)
	stored := rows(`SELECT workflow, status, count(*) FROM runs GROUP BY 1, 2 ORDER BY 1, 2`)
	if !slices.Equal(kept, stored) {
		t.Errorf("run_counts holds %v, the runs stored are %v", kept, stored)
	}
}
