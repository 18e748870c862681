package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// waitFor polls cond; the test's own timeout bounds it.
func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(time.Millisecond)
	}
}

// A caller whose context ends while its write waits in the queue gets the
// context's error, and the write never happens, even once the writer gets
// to the queue.
func TestCanceledWhileQueuedWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "stem.db")
	s, err := Open(path, Options{BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Another connection holds the write lock, so the writer's batch
	// waits in BEGIN and the next request stays queued.
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(20)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "first", Workflow: "wf"}})
		first <- err
	}()
	// The writer has taken the first request once the queue is empty
	// again (it stays in the writer's hands: the lock is held).
	waitFor(func() bool { return s.writerTook(1) })
	cctx, cancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		_, err := s.CreateRuns(cctx, []storage.NewRun{{ID: "second", Workflow: "wf"}})
		second <- err
	}()
	waitFor(func() bool { return len(s.queue) == 1 })
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled CreateRuns: %v, want context.Canceled", err)
	}
	if _, err := holder.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first CreateRuns: %v", err)
	}
	// A later write goes through the same writer after the abandoned one.
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "third", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx, "second"); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("GetRun of the canceled run: %v, want ErrRunNotFound", err)
	}
	if _, err := s.GetRun(ctx, "first"); err != nil {
		t.Fatal(err)
	}
}
