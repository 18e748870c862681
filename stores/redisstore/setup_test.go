package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/storage"
)

func TestMain(m *testing.M) {
	// In a crash-test worker process this runs an engine until killed.
	// The client's own log of a node it cannot dial, which the tests that
	// kill servers provoke by the hundred, says nothing the tests check.
	redis.SetLogger(quietRedisLog{})
	crashtest.MaybeWorker(openCrashWorkerStore)
	code := m.Run()
	stopSharedCluster()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// redisURL returns STEM_TEST_REDIS_URL or skips the test.
func redisURL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv("STEM_TEST_REDIS_URL")
	if url == "" {
		tb.Skip("STEM_TEST_REDIS_URL not set: skipping tests that need a Redis server (e.g. redis://127.0.0.1:6379/0)")
	}
	return url
}

// testPrefix is a fresh random key prefix, so tests sharing a server never
// see each other's keys.
func testPrefix(tb testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return "stemtest:" + hex.EncodeToString(b[:]) + ":"
}

// quietRedisLog drops go-redis's own log lines.
type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testClient returns a client of its own for the test, closed at cleanup.
func testClient(tb testing.TB) *redis.Client {
	tb.Helper()
	o, err := redis.ParseURL(redisURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	c := redis.NewClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// cleanupPrefix deletes every key under prefix when the test ends. SCAN is
// fine here: it is test cleanup, never the store's own path.
func cleanupPrefix(tb testing.TB, c *redis.Client, prefix string) {
	tb.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 500 {
				c.Unlink(ctx, keys...)
				keys = keys[:0]
			}
		}
		if err := iter.Err(); err != nil {
			tb.Errorf("cleanup of %s: %v", prefix, err)
		}
		if len(keys) > 0 {
			c.Unlink(ctx, keys...)
		}
	})
}

// newTestStore opens a store on a fresh prefix over a client of the test's
// own; the store is closed and its keys deleted at cleanup. It returns the
// client too, for looking at keys directly.
func newTestStore(tb testing.TB, clock storage.Clock) (*Store, *redis.Client) {
	tb.Helper()
	c := testClient(tb)
	prefix := testPrefix(tb)
	cleanupPrefix(tb, c, prefix)
	s, err := New(context.Background(), c, Options{Prefix: prefix, Clock: clock, Logger: quietLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s, c
}
