package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/storage"
)

// TestChaosServerRestart: three worker processes share 300 ten-step runs on
// a private redis-server with appendonly yes and appendfsync always, which
// is killed with SIGKILL and started again (replaying its AOF) twice when a
// third of the runs are complete: at once, so scripts in flight lose their
// answers and the clients reconnect straight away; then, 300ms later, kept
// down for ten leases, longer than go-redis retries a command, so the
// workers see the errors and every lease expires while the server is away. No
// worker is restarted: their clients reconnect by themselves, and every run
// still completes once, with exactly one checkpoint per step key.
func TestChaosServerRestart(t *testing.T) {
	rd := testserver.Redis(t, "--appendonly", "yes", "--appendfsync", "always")
	const prefix = "stemrestart:"
	crashtest.Run(t, crashtest.Config{
		Open: func(t testing.TB) storage.Store {
			s, err := Open(context.Background(), rd.URL(), Options{Prefix: prefix, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Env:          []string{"STEM_TEST_REDIS_URL=" + rd.URL(), envCrashPrefix + "=" + prefix},
		Runs:         300,
		Processes:    3,
		Concurrency:  8,
		Lease:        300 * time.Millisecond,
		StepDuration: 20 * time.Millisecond,
		Disrupt: func(t *testing.T) {
			rd.Kill()
			rd.Start()
			time.Sleep(300 * time.Millisecond)
			rd.Kill()
			time.Sleep(3 * time.Second)
			rd.Start()
		},
		Timeout: 90 * time.Second,
	})
}
