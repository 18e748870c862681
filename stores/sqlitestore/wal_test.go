package sqlitestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// walSize returns the size of the store's write-ahead log file; 0 when
// there is none.
func walSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatalf("stat WAL: %v", err)
	}
	return fi.Size()
}

// soak writes steps runs × perRun checkpoints (each with an output of
// outSize bytes) as fast as the store takes them, from one goroutine per
// run, while readers load replays and list runs. It samples the WAL file's
// size all along and returns the largest size seen. Every checkpoint it
// acknowledges is then read back.
func soak(t *testing.T, s storage.Store, path string, runs, perRun, outSize int) (maxWAL int64) {
	t.Helper()
	ctx := t.Context()
	news := make([]storage.NewRun, runs)
	for i := range news {
		news[i] = storage.NewRun{ID: fmt.Sprintf("soak-%03d", i), Workflow: "soak", Input: []byte(`{}`)}
	}
	if _, err := s.CreateRuns(ctx, news); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "soak", Workflows: []string{"soak"}, Limit: runs, LeaseFor: time.Hour})
	if err != nil || len(claimed) != runs {
		t.Fatalf("Claim: %d runs, %v", len(claimed), err)
	}

	var max atomic.Int64
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // the sampler
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if n := walSize(t, path); n > max.Load() {
				max.Store(n)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	for r := range 2 { // readers, as workers and operators read meanwhile
		bg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := claimed[(i*7+r)%runs].Lease.RunID
				if _, err := s.LoadReplay(ctx, id); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.ListRuns(ctx, storage.ListRunsQuery{Limit: 20}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}

	output := bytes.Repeat([]byte("x"), outSize)
	output[0], output[len(output)-1] = '"', '"'
	var writers sync.WaitGroup
	for _, cl := range claimed {
		writers.Go(func() {
			for k := range perRun {
				key := fmt.Sprintf("step@v1#%d", k)
				now := time.Now()
				if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{
					Lease:      cl.Lease,
					LeaseFor:   time.Hour,
					Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: output},
					Attempts:   []storage.Attempt{{Key: key, Number: 1, Started: now, Ended: now}},
				}); err != nil {
					t.Errorf("Checkpoint %s %s: %v", cl.Lease.RunID, key, err)
					return
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	bg.Wait()
	if n := walSize(t, path); n > max.Load() {
		max.Store(n)
	}
	for _, cl := range claimed {
		rp, err := s.LoadReplay(ctx, cl.Lease.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rp.Checkpoints) != perRun {
			t.Fatalf("run %s: %d checkpoints after the soak, want %d", cl.Lease.RunID, len(rp.Checkpoints), perRun)
		}
	}
	return max.Load()
}

// TestWALBoundedUnderLoad writes checkpoints as fast as the store takes
// them, while readers read, and checks the write-ahead log file never grows
// much past Options.MaxWAL, then shrinks to nothing once the writer idles.
func TestWALBoundedUnderLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("soak test; skipped with -short")
	}
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{})
	t0 := time.Now()
	maxWAL := soak(t, s, path, 32, 200, 1024)
	t.Logf("soak took %v", time.Since(t0))
	dbSize := fileSize(t, path)
	t.Logf("largest WAL seen: %d bytes; database: %d bytes", maxWAL, dbSize)

	// Bound: MaxWAL plus one batch's pages; a batch here is at most 32
	// checkpoints of about 1 KiB, a few pages each.
	const bound = sqlitestore.DefaultMaxWAL + 1<<20
	if maxWAL > bound {
		t.Errorf("WAL reached %d bytes under load, want at most %d (database %d bytes)", maxWAL, bound, dbSize)
	}

	// Idle: the log is copied into the database and truncated.
	deadline := time.Now().Add(10 * time.Second)
	for walSize(t, path) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := walSize(t, path); n > 0 {
		t.Errorf("WAL is %d bytes after the writer idled, want 0 (truncated)", n)
	}
	// And the store still writes and reads after the truncation.
	ctx := context.Background()
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "after", Workflow: "soak", Input: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx, "after"); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestOpenRejectsNegativeMaxWAL(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	_, err := sqlitestore.Open(path, sqlitestore.Options{MaxWAL: -1})
	if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "MaxWAL") {
		t.Fatalf("Open with MaxWAL -1 = %v, want ErrInvalidArgument naming MaxWAL", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("Open with a bad option left a file at %s (stat: %v)", path, err)
	}
}
