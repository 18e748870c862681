package pgstore

import (
	"testing"
	"time"

	"github.com/stemflow/stem/internal/crashtest"
)

// TestChaosQueueLimit: four worker processes, killed at random and
// replaced, work 200 ten-step runs on a queue of concurrency 3. From the
// steps' own begin and end lines (a killed worker's steps ending at its
// kill), no moment has more than 3 runs executing steps, and every run
// completes once with one checkpoint per step.
func TestChaosQueueLimit(t *testing.T) {
	cfg := crashConfig(t)
	cfg.Processes = 4
	cfg.Runs = 200
	cfg.QueueLimit = 3
	cfg.Lease = 500 * time.Millisecond
	cfg.StepDuration = 4 * time.Millisecond
	cfg.KillEvery = 400 * time.Millisecond
	cfg.Kills = 5
	cfg.Timeout = 2 * time.Minute
	rep := crashtest.Run(t, cfg)
	t.Logf("at most %d runs executed steps at once (limit 3)", rep.MaxExecuting)
}

// TestChaosSchedule: four worker processes serve a schedule that ticks
// every second for six seconds, one killed and replaced every 1.5s or so:
// every tick starts exactly one run.
func TestChaosSchedule(t *testing.T) {
	cfg := crashConfig(t)
	crashtest.RunSchedule(t, crashtest.ScheduleConfig{Open: cfg.Open, Env: cfg.Env, Processes: 4, Ticks: 6, KillEvery: 1500 * time.Millisecond})
}
