package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// cancelWriter collects output and cancels when a progress line shows every
// order waiting: all have reserved stock and sleep through their cool-off.
type cancelWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel context.CancelFunc
}

var allWaiting = regexp.MustCompile(`(?m)^\s+\S+s\s+0/30 done\s+\(queued 0, running 0, waiting 30,`)

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if allWaiting.MatchString(w.buf.String()) {
		w.cancel()
	}
	return len(p), nil
}

func (w *cancelWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// The main job: interrupted half-way (every order sleeping through its
// cool-off) and run again, it resumes the unfinished orders instead of
// starting over, and every order completes.
func TestInterruptedRunResumes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "stem.db")
	args := []string{"--store", db, "--orders", "30", "--cool-off", "2s", "--truck", "100ms", "--plain"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := &cancelWriter{cancel: cancel}
	var errOut bytes.Buffer
	if code := run(ctx, args, first, &errOut); code != 130 {
		t.Fatalf("first session: exit %d, want 130 (interrupted)\n%s%s", code, first, errOut.String())
	}
	if !strings.Contains(first.String(), "interrupted:") {
		t.Fatalf("first session output:\n%s", first)
	}
	resumedAt := time.Now()

	var second bytes.Buffer
	if code := run(context.Background(), args, &second, &errOut); code != 0 {
		t.Fatalf("second session: exit %d\n%s%s", code, second.String(), errOut.String())
	}
	out := second.String()
	if !strings.Contains(out, "found 30 orders from an earlier session in "+db+": 0 finished, resuming 30") || !strings.Contains(out, "summary: 30 orders complete, 0 errored") {
		t.Fatalf("second session output:\n%s", out)
	}

	// Nothing started over: every order's reservation (which ran beside the
	// shipping quote, so it is not necessarily the first checkpoint) kept
	// its checkpoint from the first session.
	store, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for i := 1; i <= 30; i++ {
		id := "order-" + leftPad(i)
		replay, err := store.LoadReplay(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(replay.Checkpoints, func(cp storage.Checkpoint) bool { return cp.Key == "reserve@v1" })
		if i < 0 || !replay.Checkpoints[i].CreatedAt.Before(resumedAt) {
			t.Fatalf("%s: checkpoints %+v, want reserve@v1 from the first session", id, replay.Checkpoints)
		}
		r, err := store.GetRun(context.Background(), id)
		if err != nil || r.Status != runtime.StatusComplete {
			t.Fatalf("%s: %v %v", id, r.Status, err)
		}
	}
}

func leftPad(i int) string {
	s := strconv.Itoa(i)
	return strings.Repeat("0", 4-len(s)) + s
}

// On a Redis server without an append-only file the worker says once, on
// stderr, what that means for durability; the progress on stdout is left
// alone.
func TestRedisDurabilityWarnedOnce(t *testing.T) {
	url := os.Getenv("STEM_TEST_REDIS_URL")
	if url == "" {
		t.Skip("STEM_TEST_REDIS_URL is not set; set it to a Redis server to run this test")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	aof, err := c.ConfigGet(context.Background(), "appendonly").Result()
	if err != nil {
		t.Skipf("cannot read the server's appendonly setting: %v", err)
	}
	if aof["appendonly"] == "yes" {
		t.Skip("the test server has an append-only file, so there is nothing to warn about")
	}
	prefix := fmt.Sprintf("orders-test-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		keys, _ := c.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
	})
	store := url + "?stem_prefix=" + prefix
	if strings.Contains(url, "?") {
		store = url + "&stem_prefix=" + prefix
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--store", store, "--orders", "2", "--cool-off", "10ms", "--truck", "10ms", "--plain"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if n := strings.Count(errOut.String(), "append-only file is off"); n != 1 {
		t.Fatalf("stderr warned %d times, want once:\n%s", n, errOut.String())
	}
	if strings.Contains(out.String(), "append-only") {
		t.Fatalf("the warning reached the progress output:\n%s", out.String())
	}
}
