package pgstore

import (
	"testing"
	"time"

	"github.com/stemflow/stem/internal/crashtest"
)

// TestChaosQueueLimit: a queue limit of 3 holds across four worker
// processes killed at random (crashtest.RunQueueLimit).
func TestChaosQueueLimit(t *testing.T) { crashtest.RunQueueLimit(t, crashConfig(t)) }

// TestChaosSchedule: four worker processes, killed at random, start one
// run per tick of a schedule (crashtest.RunFourScheduleWorkers).
func TestChaosSchedule(t *testing.T) { crashtest.RunFourScheduleWorkers(t, crashConfig(t)) }

// TestChaosKeys: singleton and debounce keys hold across four processes
// starting runs at once (crashtest.RunKeys).
func TestChaosKeys(t *testing.T) { crashtest.RunKeys(t, crashConfig(t)) }

// TestChaosTxSteps: 1000 runs of ten transactional steps, each writing a
// row of an application table in its transaction, on four worker
// processes killed at random: every step's row is there exactly once.
func TestChaosTxSteps(t *testing.T) {
	cfg := crashConfig(t)
	cfg.TxSteps = true
	cfg.Processes = 4
	cfg.Runs = 1000
	cfg.StepDuration = 30 * time.Millisecond
	cfg.KillEvery = 300 * time.Millisecond
	cfg.Kills = 8
	if testing.Short() {
		cfg.Runs = 300
		cfg.Kills = 3
	}
	cfg.Timeout = 110 * time.Second
	crashtest.Run(t, cfg)
}
