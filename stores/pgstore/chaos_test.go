package pgstore

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/storage"
)

// envCrashSchema tells a crash-test worker process which schema the test
// uses; the server comes from STEM_TEST_POSTGRES_URL.
const envCrashSchema = "STEM_CRASHTEST_PG_SCHEMA"

// envCrashPooler, when set, is the URL of the transaction pooler a
// crash-test worker process reaches the server through, in pooler mode;
// envCrashListen, when set too, is the direct URL its listener uses.
const (
	envCrashPooler = "STEM_CRASHTEST_PG_POOLER"
	envCrashListen = "STEM_CRASHTEST_PG_LISTEN"
)

// crashURL is the test server's URL with a pool small enough that several
// worker processes fit in the server's connection limit.
func crashURL(url string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "pool_max_conns=10"
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openCrashWorkerStore opens the store in a crash-test worker process, on
// the database clock that every process shares.
func openCrashWorkerStore() (storage.Store, error) {
	if pooler := os.Getenv(envCrashPooler); pooler != "" {
		return Open(context.Background(), crashURL(pooler), Options{
			Schema:            os.Getenv(envCrashSchema),
			SkipMigrate:       true,
			TransactionPooler: true,
			ListenURL:         os.Getenv(envCrashListen),
			Logger:            quietLogger(),
		})
	}
	return Open(context.Background(), crashURL(os.Getenv(urlEnv)), Options{
		Schema:      os.Getenv(envCrashSchema),
		SkipMigrate: true,
		Logger:      quietLogger(),
	})
}

// crashConfig is a crash test on a fresh schema of the test server.
func crashConfig(t *testing.T) crashtest.Config {
	url := testURL(t)
	schema := freshSchema(t)
	return crashtest.Config{
		Open: func(t testing.TB) storage.Store {
			s, err := Open(context.Background(), crashURL(url), Options{Schema: schema, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Env:          []string{envCrashSchema + "=" + schema},
		Processes:    3,
		Concurrency:  8,
		Lease:        500 * time.Millisecond,
		StepDuration: 10 * time.Millisecond,
		Timeout:      45 * time.Second,
	}
}

// TestChaosKill: four worker processes share 1000 ten-step runs while
// random ones are killed with SIGKILL every few hundred milliseconds
// (mid-statement, mid-transaction, holding row locks the server then drops)
// and replaced. Every run completes once, every step key has exactly one
// checkpoint, every step ran; the re-executions are logged. Under -short,
// 300 runs. The chaos tests run one at a time: each holds five processes'
// connections.
func TestChaosKill(t *testing.T) { crashtest.Run(t, withKills(crashConfig(t))) }

// withKills is cfg with four worker processes sharing 1000 ten-step runs
// (300 under -short) while random ones are killed with SIGKILL and
// replaced, eight times (three).
func withKills(cfg crashtest.Config) crashtest.Config {
	cfg.Processes = 4
	cfg.Runs = 1000
	// At least 1000×10×15ms/32 ≈ 4.7s of step work, past the last kill
	// (eight at 150–450ms each).
	cfg.StepDuration = 30 * time.Millisecond
	cfg.KillEvery = 300 * time.Millisecond
	cfg.Kills = 8
	if testing.Short() {
		cfg.Runs = 300
		cfg.Kills = 3
	}
	cfg.Timeout = 110 * time.Second
	return cfg
}

// TestChaosFreeze: one of four workers is stopped with SIGSTOP for three
// leases and until the others have taken its runs over, then resumed: every
// write it sends under its old leases is rejected by the fence, and every
// run still completes once.
func TestChaosFreeze(t *testing.T) {
	cfg := crashConfig(t)
	cfg.Processes = 4
	cfg.Runs = 300
	cfg.StepDuration = 20 * time.Millisecond
	cfg.Freeze = true
	crashtest.Run(t, cfg)
}
