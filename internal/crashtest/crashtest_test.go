package crashtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
)

const envFile = "STEM_CRASHTEST_SQLITE_FILE"

func TestMain(m *testing.M) {
	crashtest.MaybeWorker(func() (runtime.Store, error) {
		return sqlitestore.Open(os.Getenv(envFile), sqlitestore.Options{})
	})
	os.Exit(m.Run())
}

// The SQLite crash test: a worker process runs 200 runs × 10 steps on a
// file and is killed with SIGKILL at a random moment; a fresh engine in this
// process reopens the file and finishes. Every run completes once, every
// step key has exactly one checkpoint, every step ran at least once. Repeated
// at several kill points.
func TestSQLiteCrashAndReopen(t *testing.T) {
	for i, killAfter := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, time.Second} {
		t.Run(fmt.Sprintf("kill after ~%v", killAfter), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), fmt.Sprintf("crash%d.db", i))
			crashtest.Run(t, crashtest.Config{
				Open: func(t testing.TB) runtime.Store {
					s, err := sqlitestore.Open(path, sqlitestore.Options{})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { s.Close() })
					return s
				},
				Env:             []string{envFile + "=" + path},
				Runs:            200,
				Processes:       1,
				Concurrency:     8,
				Lease:           300 * time.Millisecond,
				StepDuration:    20 * time.Millisecond, // ≥ 200×10×10ms/8 = 2.5s of work, past the kill
				KillEvery:       killAfter,
				Kills:           1,
				FinishInProcess: true,
				Timeout:         time.Minute,
			})
		})
	}
}
