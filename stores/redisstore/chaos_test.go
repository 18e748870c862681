package redisstore

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/internal/crashtest"
)

// envCrashPrefix tells a crash-test worker process which prefix the test
// uses; the server comes from STEM_TEST_REDIS_URL.
const envCrashPrefix = "STEM_CRASHTEST_REDIS_PREFIX"

// envCrashCluster tells a crash-test worker process the URL of the Redis
// Cluster the test uses, when it uses one; envCrashWait its store's
// WaitReplicas.
const (
	envCrashCluster = "STEM_CRASHTEST_REDIS_CLUSTER_URL"
	envCrashWait    = "STEM_CRASHTEST_REDIS_WAIT"
)

// openCrashWorkerStore opens the store in a crash-test worker process. It
// uses the server's clock, which every process shares.
func openCrashWorkerStore() (storage.Store, error) {
	if url := os.Getenv(envCrashCluster); url != "" {
		wait, _ := strconv.Atoi(os.Getenv(envCrashWait))
		return OpenCluster(context.Background(), url, ClusterOptions{Options: Options{
			Prefix: os.Getenv(envCrashPrefix), Logger: quietLogger(), WaitReplicas: wait,
		}})
	}
	return Open(context.Background(), os.Getenv("STEM_TEST_REDIS_URL"), Options{
		Prefix: os.Getenv(envCrashPrefix),
		Logger: quietLogger(),
	})
}

// crashConfig is a crash test on a fresh prefix of the test server.
func crashConfig(t *testing.T) crashtest.Config {
	url := redisURL(t)
	prefix := testPrefix(t)
	cleanupPrefix(t, testClient(t), prefix)
	return crashConfigOf(func() (storage.Store, error) {
		return Open(context.Background(), url, Options{Prefix: prefix, Logger: quietLogger()})
	}, envCrashPrefix+"="+prefix)
}

// crashConfigOf is a crash test of three workers of eight, whose harness
// opens its store with open and whose workers get env.
func crashConfigOf(open func() (storage.Store, error), env ...string) crashtest.Config {
	return crashtest.Config{
		Open: func(t testing.TB) storage.Store {
			s, err := open()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Env:          env,
		Processes:    3,
		Concurrency:  8,
		Lease:        300 * time.Millisecond,
		StepDuration: 10 * time.Millisecond,
		Timeout:      time.Minute,
	}
}

// TestChaosKill: four worker processes share 1000 ten-step runs while random
// ones are killed with SIGKILL every few hundred milliseconds and replaced.
// Every run completes once, every step key has exactly one checkpoint, every
// step ran. Under -short, 300 runs.
func TestChaosKill(t *testing.T) { crashtest.Run(t, withKills(crashConfig(t))) }

// withKills is cfg with four worker processes sharing 1000 ten-step runs
// (300 under -short) while random ones are killed with SIGKILL and
// replaced, six times.
func withKills(cfg crashtest.Config) crashtest.Config {
	cfg.Processes = 4
	cfg.Runs = 1000
	if testing.Short() {
		cfg.Runs = 300
	}
	// At least 1000×10×15ms/32 ≈ 4.7s of step work, past the last kill
	// (six at 150–450ms each).
	cfg.StepDuration = 30 * time.Millisecond
	cfg.KillEvery = 300 * time.Millisecond
	cfg.Kills = 6
	return cfg
}

// TestChaosFreeze: one of four workers is frozen with SIGSTOP for three
// lease lengths while the others take its runs over, then thawed with
// SIGCONT: every write it sends after thawing under a superseded lease is
// rejected, and the runs still complete once each.
func TestChaosFreeze(t *testing.T) {
	cfg := crashConfig(t)
	cfg.Processes = 4
	cfg.Runs = 300
	cfg.StepDuration = 20 * time.Millisecond
	cfg.Freeze = true
	crashtest.Run(t, cfg)
}
