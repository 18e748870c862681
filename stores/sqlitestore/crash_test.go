package sqlitestore_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// envCrashFile names the database file crash-test worker processes open,
// and envCrashSync their synchronous mode (NORMAL when unset).
const (
	envCrashFile = "STEM_SQLITESTORE_CRASH_FILE"
	envCrashSync = "STEM_SQLITESTORE_CRASH_SYNC"
)

// crashOptions are the options of a crash-test store in synchronous mode
// sync ("FULL" or anything else for NORMAL).
func crashOptions(sync string) sqlitestore.Options {
	if sync == sqlitestore.SyncFull.String() {
		return sqlitestore.Options{Synchronous: sqlitestore.SyncFull}
	}
	return sqlitestore.Options{}
}

// crashConfig is a crash test on a fresh SQLite file: the harness's process
// and the worker processes open the same file.
func crashConfig(t *testing.T) crashtest.Config {
	return crashConfigSync(t, sqlitestore.SyncNormal)
}

// crashConfigSync is crashConfig with every process in synchronous mode
// mode.
func crashConfigSync(t *testing.T, mode sqlitestore.Synchronous) crashtest.Config {
	path := filepath.Join(t.TempDir(), "crash.db")
	return crashtest.Config{
		Open: func(t testing.TB) storage.Store {
			s, err := sqlitestore.Open(path, crashOptions(mode.String()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Env:         []string{envCrashFile + "=" + path, envCrashSync + "=" + mode.String()},
		Concurrency: 8,
		Timeout:     time.Minute,
	}
}

// TestCrashAndReopen: a worker process runs 200 runs × 10 steps on a file
// and is killed with SIGKILL at a random moment; a fresh engine in this
// process reopens the file and finishes. Every run completes once, every
// step key has exactly one checkpoint, every step ran at least once.
// Repeated at several kill points.
func TestCrashAndReopen(t *testing.T) {
	for _, killAfter := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, time.Second} {
		t.Run(fmt.Sprintf("kill after ~%v", killAfter), func(t *testing.T) {
			cfg := crashConfig(t)
			cfg.Runs = 200
			cfg.Processes = 1
			cfg.Lease = 300 * time.Millisecond
			cfg.StepDuration = 20 * time.Millisecond // ≥ 200×10×10ms/8 = 2.5s of work, past the kill
			cfg.KillEvery = killAfter
			cfg.Kills = 1
			cfg.FinishInProcess = true
			crashtest.Run(t, cfg)
		})
	}
}

// TestCrashManyProcesses runs three worker processes, each with its own
// engine and Store, on one SQLite file, and kills them with SIGKILL at random
// moments (a killed process may hold the file's write lock mid-transaction;
// the lock dies with it and the WAL drops the uncommitted frames), replacing
// each. Every run completes exactly once, with exactly one checkpoint per
// step. With SyncFull too, where claims and heartbeats commit without an
// fsync while other processes' writes fsync the same log.
//
// The harness's freeze check (SIGSTOP past the leases) is not used: a
// process stopped while it holds SQLite's write lock stops every writer on
// the file until it resumes.
func TestCrashManyProcesses(t *testing.T) {
	for _, mode := range []sqlitestore.Synchronous{sqlitestore.SyncNormal, sqlitestore.SyncFull} {
		t.Run("sync="+mode.String(), func(t *testing.T) {
			cfg := crashConfigSync(t, mode)
			cfg.Runs = 300
			cfg.Processes = 3
			cfg.Lease = 500 * time.Millisecond
			cfg.StepDuration = 20 * time.Millisecond
			cfg.KillEvery = 300 * time.Millisecond
			cfg.Kills = 3
			crashtest.Run(t, cfg)
		})
	}
}
