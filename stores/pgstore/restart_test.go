package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/storage"
)

// TestChaosServerRestart: three worker processes share 300 ten-step runs on
// a private Postgres cluster, which is crashed (pg_ctl -m immediate: every
// backend killed mid-statement, crash recovery on start) twice when a third
// of the runs are complete: restarted at once, so statements in flight lose
// their answers and the pools reconnect straight away; then, 300ms later,
// kept down for four leases, so every lease expires while the server is
// away. No worker is restarted: their pools reconnect by themselves, and
// every run still completes once, with exactly one checkpoint per step key.
func TestChaosServerRestart(t *testing.T) {
	pg := testserver.Postgres(t)
	url := crashURL(pg.URL())
	const schema = "stem_restart"
	crashtest.Run(t, crashtest.Config{
		Open: func(t testing.TB) storage.Store {
			s, err := Open(context.Background(), url, Options{Schema: schema, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Env:          []string{urlEnv + "=" + pg.URL(), envCrashSchema + "=" + schema},
		Runs:         300,
		Processes:    3,
		Concurrency:  8,
		Lease:        500 * time.Millisecond,
		StepDuration: 20 * time.Millisecond,
		Disrupt: func(t *testing.T) {
			pg.Restart("immediate")
			time.Sleep(300 * time.Millisecond)
			pg.Kill()
			time.Sleep(2 * time.Second)
			pg.Start()
		},
		Timeout: 90 * time.Second,
	})
}
