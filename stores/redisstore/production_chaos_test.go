package redisstore

import (
	"testing"

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
