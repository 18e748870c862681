package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// envCrashFile names the database file crash-test worker processes open.
const envCrashFile = "STEM_SQLITESTORE_CRASH_FILE"

// TestCrashManyProcesses runs three worker processes, each with its own
// engine and Store, on one SQLite file, and kills them with SIGKILL at random
// moments (a killed process may hold the file's write lock mid-transaction;
// the lock dies with it and the WAL drops the uncommitted frames), replacing
// each. Every run completes exactly once, with exactly one checkpoint per
// step.
//
// The harness's freeze check (SIGSTOP past the leases) is not used: a
// process stopped while it holds SQLite's write lock stops every writer on
// the file until it resumes, so whether others take its runs over during
// the freeze is chance.
func TestCrashManyProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	rep := crashtest.Run(t, crashtest.Config{
		Open: func(t testing.TB) runtime.Store {
			s, err := sqlitestore.Open(path, sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Env:          []string{envCrashFile + "=" + path},
		Runs:         300,
		Processes:    3,
		Concurrency:  8,
		Lease:        500 * time.Millisecond,
		StepDuration: 20 * time.Millisecond,
		KillEvery:    300 * time.Millisecond,
		Kills:        3,
		Timeout:      45 * time.Second,
	})
	if rep.Kills != 3 {
		t.Fatalf("%d kills, want 3", rep.Kills)
	}
}
