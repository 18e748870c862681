package sqlitestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"

	"go.uber.org/goleak"

	"github.com/stemflow/stem/internal/crashtest"
	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/stores/storetest"
)

func TestMain(m *testing.M) {
	// In a crash-test worker process: run an engine on the file until
	// killed; never returns.
	crashtest.MaybeWorker(func() (storage.Store, error) {
		return sqlitestore.Open(os.Getenv(envCrashFile), crashOptions(os.Getenv(envCrashSync)))
	})
	goleak.VerifyTestMain(m)
}

// newClock returns the suite's manual clock at its start.
func newClock() *storetest.Clock { return storetest.NewClock(storetest.Start) }

func open(t testing.TB, path string, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "stem.db") }

func claimOne(t *testing.T, s storage.Store, owner, workflow string) storage.ClaimedRun {
	t.Helper()
	got, err := s.Claim(t.Context(), storage.ClaimRequest{Owner: owner, Workflows: []string{workflow}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim = %v, %v; want one run", got, err)
	}
	return got[0]
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClock()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{Clock: c})
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf", Input: []byte("in")}}); err != nil {
		t.Fatal(err)
	}
	cl := claimOne(t, s, "w", "wf")
	for i, out := range [][]byte{[]byte("1"), {}, nil} {
		key := fmt.Sprintf("s%d@v1", i)
		res, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: out},
			Attempts:   []storage.Attempt{{Key: key, Number: 1, Started: c.Now(), Ended: c.Now().Add(time.Millisecond)}}})
		if err != nil || res.Existing != nil || res.Paused {
			t.Fatalf("Checkpoint(%s) = %+v, %v", key, res, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, the file holds everything; an empty output stays empty, a
	// nil one nil.
	s = open(t, path, sqlitestore.Options{Clock: c})
	rp, err := s.LoadReplay(ctx, "r1")
	if err != nil || rp.Execution != 1 || len(rp.Checkpoints) != 3 {
		t.Fatalf("LoadReplay = %+v, %v", rp, err)
	}
	cps := rp.Checkpoints
	if !bytes.Equal(cps[0].Output, []byte("1")) || cps[1].Output == nil || len(cps[1].Output) != 0 || cps[2].Output != nil {
		t.Fatalf("outputs = %q %#v %#v, want \"1\", empty, nil", cps[0].Output, cps[1].Output, cps[2].Output)
	}
	if !(cps[0].Seq < cps[1].Seq && cps[1].Seq < cps[2].Seq) {
		t.Fatalf("seqs %d %d %d not increasing", cps[0].Seq, cps[1].Seq, cps[2].Seq)
	}
	h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "r1"})
	if err != nil || h.Execution != 1 || len(h.Steps) != 3 || len(h.Steps[1].Attempts) != 1 || h.Steps[1].Attempts[0].Key != "s1@v1" || h.Steps[1].Attempts[0].Execution != 1 {
		t.Fatalf("ListSteps = %+v, %v", h, err)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: cl.Lease, Status: storage.StatusComplete, Output: []byte("out")}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetRun(ctx, "r1")
	if err != nil || rec.Status != storage.StatusComplete || string(rec.Output) != "out" {
		t.Fatalf("GetRun = %+v, %v", rec, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO stem_schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlitestore.Open(path, sqlitestore.Options{})
	if err == nil {
		t.Fatal("Open of a database with a newer schema succeeded")
	}
	known := fmt.Sprintf("(%d)", sqlitestore.SchemaVersion())
	if !strings.Contains(err.Error(), "version 999") || !strings.Contains(err.Error(), known) {
		t.Fatalf("error %q does not name both versions (999 and %s)", err, known)
	}
}

func TestCanceledCallWritesNothing(t *testing.T) {
	t.Parallel()
	s := open(t, dbPath(t), sqlitestore.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("CreateRuns with a canceled context: %v", err)
	}
	if _, err := s.GetRun(t.Context(), "r1"); !errors.Is(err, storage.ErrRunNotFound) {
		t.Fatalf("GetRun after a canceled create: %v", err)
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(dbPath(t), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Notifications(t.Context())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; ok {
		t.Fatal("notification channel open after Close")
	}
	ctx := t.Context()
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf"}}); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("CreateRuns after Close: %v", err)
	}
	if _, err := s.GetRun(ctx, "r"); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("GetRun after Close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// A batch's failing request (a stale lease) is rolled back alone: the
// requests committed with it are unaffected.
func TestFailingRequestsDoNotSpoilTheBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClock()
	s := open(t, dbPath(t), sqlitestore.Options{Clock: c})
	const n = 32
	var runs []storage.NewRun
	for i := range n {
		runs = append(runs, storage.NewRun{ID: fmt.Sprintf("r%02d", i), Workflow: "wf"})
	}
	if _, err := s.CreateRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: n, LeaseFor: time.Minute})
	if err != nil || len(claimed) != n {
		t.Fatalf("Claim = %d runs, %v", len(claimed), err)
	}
	var wg sync.WaitGroup
	for i, cl := range claimed {
		wg.Go(func() {
			for j := range 20 {
				l := cl.Lease
				stale := (i+j)%3 == 0
				if stale {
					l.Token-- // an older lease: must fail, write nothing
				}
				_, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
					Checkpoint: storage.Checkpoint{Key: fmt.Sprintf("k%d", j), Kind: storage.KindStep, Output: []byte("x")}})
				if stale != errors.Is(err, storage.ErrLeaseLost) || (!stale && err != nil) {
					t.Errorf("Checkpoint(%s, k%d, stale %v): %v", l.RunID, j, stale, err)
				}
			}
		})
	}
	wg.Wait()
	for i, cl := range claimed {
		rp, err := s.LoadReplay(ctx, cl.Lease.RunID)
		if err != nil {
			t.Fatal(err)
		}
		cps := rp.Checkpoints
		var want []string
		for j := range 20 {
			if (i+j)%3 != 0 {
				want = append(want, fmt.Sprintf("k%d", j))
			}
		}
		var got []string
		for _, cp := range cps {
			got = append(got, cp.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("checkpoints of %s = %v, want %v", cl.Lease.RunID, got, want)
		}
	}
}

// Eight stores on one file, each with its own writer and connections,
// writing at once: SQLite's lock serialises them, no caller sees
// SQLITE_BUSY, and no run is handed to two of them.
func TestManyStoresOneFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	const stores, workers, runsPerStore, steps = 8, 2, 12, 4
	all := make([]*sqlitestore.Store, stores)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range stores {
		wg.Go(func() {
			s, err := sqlitestore.Open(path, sqlitestore.Options{})
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
				return
			}
			mu.Lock()
			all[i] = s
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, s := range all {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
	}
	if t.Failed() {
		return
	}
	claims := map[string]string{}
	for i, s := range all {
		for w := range workers {
			wg.Go(func() {
				owner := fmt.Sprintf("store%d-w%d", i, w)
				var runs []storage.NewRun
				for r := range runsPerStore / workers {
					runs = append(runs, storage.NewRun{ID: fmt.Sprintf("%s-r%d", owner, r), Workflow: "wf"})
				}
				if _, err := s.CreateRuns(ctx, runs); err != nil {
					t.Errorf("CreateRuns: %v", err)
					return
				}
				for {
					got, err := s.Claim(ctx, storage.ClaimRequest{Owner: owner, Workflows: []string{"wf"}, Limit: 2, LeaseFor: time.Hour})
					if err != nil {
						t.Errorf("Claim: %v", err)
						return
					}
					if len(got) == 0 {
						return
					}
					for _, cl := range got {
						mu.Lock()
						if prev, ok := claims[cl.Lease.RunID]; ok {
							t.Errorf("run %s claimed by %s and %s", cl.Lease.RunID, prev, owner)
						}
						claims[cl.Lease.RunID] = owner
						mu.Unlock()
						for k := range steps {
							if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Hour,
								Checkpoint: storage.Checkpoint{Key: fmt.Sprint(k), Kind: storage.KindStep}}); err != nil {
								t.Errorf("Checkpoint: %v", err)
								return
							}
						}
						if err := s.Complete(ctx, storage.CompleteRequest{Lease: cl.Lease, Status: storage.StatusComplete}); err != nil {
							t.Errorf("Complete: %v", err)
							return
						}
					}
				}
			})
		}
	}
	wg.Wait()
	page, err := all[0].ListRuns(ctx, storage.ListRunsQuery{Status: storage.StatusComplete, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != stores*runsPerStore {
		t.Fatalf("%d runs complete, want %d", len(page.Runs), stores*runsPerStore)
	}
	for _, r := range page.Runs {
		rp, err := all[len(all)-1].LoadReplay(ctx, r.ID)
		if err != nil || len(rp.Checkpoints) != steps {
			t.Fatalf("checkpoints of %s: %d, %v", r.ID, len(rp.Checkpoints), err)
		}
	}
}

func TestNotifications(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	s := open(t, dbPath(t), sqlitestore.Options{})
	ch := s.Notifications(ctx)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; !ok {
		t.Fatal("channel closed, want a notification")
	}
	cancel()
	for range ch {
	}
}

func TestOptionsValidated(t *testing.T) {
	t.Parallel()
	for _, opts := range []sqlitestore.Options{{Synchronous: 7}, {MaxBatch: -1}} {
		if s, err := sqlitestore.Open(dbPath(t), opts); !errors.Is(err, storage.ErrInvalidArgument) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("Open(%+v): %v, want ErrInvalidArgument", opts, err)
		}
	}
}

// Another connection holding the write lock for longer than busy_timeout
// delays writes but never fails them with SQLITE_BUSY; reads go on.
func TestLockHeldPastBusyTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{BusyTimeout: 20 * time.Millisecond})
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "before", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}

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
	created := make(chan error, 1)
	go func() {
		_, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "during", Workflow: "wf"}})
		created <- err
	}()
	// Reads do not wait for the writer's lock.
	if _, err := s.GetRun(ctx, "before"); err != nil {
		t.Fatalf("GetRun while another connection writes: %v", err)
	}
	// Hold the lock for many busy timeouts (the write cannot have
	// succeeded meanwhile: it needs this lock).
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-created:
		t.Fatalf("CreateRuns returned while the lock was held: %v", err)
	default:
	}
	if _, err := holder.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != nil {
		t.Fatalf("CreateRuns after the lock was released: %v", err)
	}
	if _, err := s.GetRun(ctx, "during"); err != nil {
		t.Fatal(err)
	}
}

// Payloads far larger than a page round-trip byte for byte, and do not
// slow the per-step path (they live apart from the run's state).
func TestLargePayloads(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, dbPath(t), sqlitestore.Options{})
	big := func(seed byte, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	input := big(1, 2<<20)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", Input: input}}); err != nil {
		t.Fatal(err)
	}
	cl := claimOne(t, s, "w", "wf")
	if !bytes.Equal(cl.Input, input) {
		t.Fatal("claimed input differs")
	}
	out := big(2, 1<<20)
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindStep, Output: out}}); err != nil {
		t.Fatal(err)
	}
	state := big(3, 300<<10)
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: cl.Lease, LeaseFor: time.Minute, ReadyAt: new(time.Now().Add(-time.Second)), SuspendState: state}); err != nil {
		t.Fatal(err)
	}
	cl = claimOne(t, s, "w", "wf")
	if !bytes.Equal(cl.SuspendState, state) || !bytes.Equal(cl.Input, input) {
		t.Fatal("suspend state or input differs after a suspension")
	}
	rp, err := s.LoadReplay(ctx, "r")
	if err != nil || len(rp.Checkpoints) != 1 || !bytes.Equal(rp.Checkpoints[0].Output, out) {
		t.Fatalf("LoadReplay: %d checkpoints, %v", len(rp.Checkpoints), err)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: cl.Lease, Status: storage.StatusComplete, Output: out}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetRun(ctx, "r")
	if err != nil || !bytes.Equal(rec.Output, out) || !bytes.Equal(rec.Input, input) {
		t.Fatalf("GetRun: %v", err)
	}
}

func TestPathValidated(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", ":memory:", "file:x.db", filepath.Join(t.TempDir(), "a?b.db")} {
		if s, err := sqlitestore.Open(path, sqlitestore.Options{}); !errors.Is(err, storage.ErrInvalidArgument) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("Open(%q): %v, want ErrInvalidArgument", path, err)
		}
	}
}
