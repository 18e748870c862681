//go:build linux

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
	"syscall"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// smallFS mounts a tmpfs of size bytes under t.TempDir and unmounts it when
// the test ends (after the cleanups registered later, such as closing a
// store on it). It skips the test where mounting is not permitted.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a %d-byte tmpfs on %s to fill (needs root with CAP_SYS_ADMIN, as CI's container has): %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes path until the file system has no space left and returns the
// number of bytes written.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	var n int64
	for {
		k, err := f.Write(chunk)
		n += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// diskFullRig writes checkpoints to runs from several goroutines, keeping
// which were acknowledged.
type diskFullRig struct {
	t       *testing.T
	s       *sqlitestore.Store
	path    string
	claimed []storage.ClaimedRun
	output  []byte

	mu    sync.Mutex
	next  map[string]int             // run → next step number
	acked map[string]map[string]bool // run → keys acknowledged
}

func newDiskFullRig(t *testing.T, s *sqlitestore.Store, path string, runs int) *diskFullRig {
	ctx := t.Context()
	news := make([]storage.NewRun, runs)
	for i := range news {
		news[i] = storage.NewRun{ID: fmt.Sprintf("full-%02d", i), Workflow: "full", Input: []byte(`{}`)}
	}
	if _, err := s.CreateRuns(ctx, news); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "full", Workflows: []string{"full"}, Limit: runs, LeaseFor: time.Hour})
	if err != nil || len(claimed) != runs {
		t.Fatalf("Claim: %d runs, %v", len(claimed), err)
	}
	output := bytes.Repeat([]byte("y"), 2048)
	output[0], output[len(output)-1] = '"', '"'
	rig := &diskFullRig{t: t, s: s, path: path, claimed: claimed, output: output,
		next: map[string]int{}, acked: map[string]map[string]bool{}}
	for _, cl := range claimed {
		rig.acked[cl.Lease.RunID] = map[string]bool{}
	}
	return rig
}

// write makes each run write n checkpoints, one goroutine per run, and
// returns the errors, one per failed call; a run stops at its first error
// unless keepGoing.
func (rig *diskFullRig) write(n int, keepGoing bool) []error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, cl := range rig.claimed {
		wg.Go(func() {
			for range n {
				rig.mu.Lock()
				key := fmt.Sprintf("step@v1#%d", rig.next[cl.Lease.RunID])
				rig.next[cl.Lease.RunID]++
				rig.mu.Unlock()
				now := time.Now()
				_, err := rig.s.Checkpoint(context.Background(), storage.CheckpointRequest{
					Lease:      cl.Lease,
					LeaseFor:   time.Hour,
					Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: rig.output},
					Attempts:   []storage.Attempt{{Key: key, Number: 1, Started: now, Ended: now}},
				})
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("run %s step %s: %w", cl.Lease.RunID, key, err))
					mu.Unlock()
					if !keepGoing {
						return
					}
					continue
				}
				rig.mu.Lock()
				rig.acked[cl.Lease.RunID][key] = true
				rig.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// check asserts that each run holds exactly the checkpoints acknowledged:
// none lost, none of a failed call written.
func (rig *diskFullRig) check(s storage.Store) int {
	rig.t.Helper()
	total := 0
	for _, cl := range rig.claimed {
		id := cl.Lease.RunID
		rp, err := s.LoadReplay(context.Background(), id)
		if err != nil {
			rig.t.Fatalf("LoadReplay(%s): %v", id, err)
		}
		got := map[string]bool{}
		for _, c := range rp.Checkpoints {
			got[c.Key] = true
			if !rig.acked[id][c.Key] {
				rig.t.Errorf("run %s holds checkpoint %s, whose Checkpoint call failed", id, c.Key)
			}
		}
		for k := range rig.acked[id] {
			if !got[k] {
				rig.t.Errorf("run %s lost acknowledged checkpoint %s", id, k)
			}
		}
		total += len(rig.acked[id])
	}
	return total
}

// TestDiskFullRecovers fills the file system holding a store until its
// writes fail, then frees less space than the database holds, and checks
// that writes fail clearly while the disk is full, succeed again once
// space is freed (without reopening the store), and that every
// acknowledged checkpoint survives, in a database that passes SQLite's
// integrity check.
func TestDiskFullRecovers(t *testing.T) {
	t.Parallel()
	dir := smallFS(t, 32<<20)
	path := filepath.Join(dir, "stem.db")
	s, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			s.Close()
		}
	})
	rig := newDiskFullRig(t, s, path, 8)

	// A database of a few MiB (and its log, which must not take the rest
	// of the 32 MiB), then ballast leaving 2 MiB.
	if errs := rig.write(300, false); len(errs) > 0 {
		t.Fatalf("filling the database (%d bytes, WAL %d bytes) on a 32 MiB file system: %v", fileSize(t, path), walSize(t, path), errs[0])
	}
	ballast := filepath.Join(dir, "ballast")
	fill(t, ballast)
	if err := os.Truncate(ballast, fileSize(t, ballast)-2<<20); err != nil {
		t.Fatal(err)
	}

	// Write until the disk is full and every write fails.
	var fullErrs []error
	for round := 0; ; round++ {
		if round == 200 {
			t.Fatalf("writes still succeed with %d bytes free", freeBytes(t, dir))
		}
		errs := rig.write(10, true)
		if len(errs) == len(rig.claimed)*10 {
			fullErrs = errs
			break
		}
	}
	walAtFull := walSize(t, path)
	t.Logf("disk full: database %d bytes, WAL %d bytes, %d bytes free", fileSize(t, path), walAtFull, freeBytes(t, dir))
	for _, err := range fullErrs {
		if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "disk full") {
			t.Fatalf("write on a full disk failed with %q, want an error naming %s and the full disk", msg, path)
		}
	}
	// Reads still work, and hold exactly what was acknowledged.
	rig.check(s)

	// Free less than the database's size: writes resume on the same Store.
	// What the store needs is room to copy the log's new pages into the
	// database file (at most MaxWAL) and for the new writes (1 MiB here).
	dbSize := fileSize(t, path)
	freed := int64(sqlitestore.DefaultMaxWAL + 1<<20)
	if freed >= dbSize {
		t.Fatalf("database only %d bytes: the test means to free less than that", dbSize)
	}
	if err := os.Truncate(ballast, fileSize(t, ballast)-freed); err != nil {
		t.Fatal(err)
	}
	t.Logf("freed %d bytes (database %d bytes, WAL %d bytes)", freed, dbSize, walSize(t, path))
	if errs := rig.write(1, false); len(errs) > 0 {
		t.Fatalf("first write after freeing %d bytes: %v", freed, errs[0])
	}
	// And keep succeeding for more than the log holds.
	for i := 0; i < 3; i++ {
		if errs := rig.write(10, false); len(errs) > 0 {
			t.Fatalf("write after freeing %d bytes (database %d bytes, WAL %d bytes, %d free): %v", freed, fileSize(t, path), walSize(t, path), freeBytes(t, dir), errs[0])
		}
	}
	n := rig.check(s)
	walAfter := walSize(t, path)
	t.Logf("recovered: %d checkpoints; database %d bytes, WAL %d bytes, %d bytes free", n, fileSize(t, path), walAfter, freeBytes(t, dir))
	// The space freed went to the database, not to a log growing on: the
	// log stays within the file it had when the disk filled (or MaxWAL/8),
	// give or take one batch.
	if bound := max(walAtFull, sqlitestore.DefaultMaxWAL/8) + 512<<10; walAfter > bound {
		t.Errorf("WAL grew from %d to %d bytes after the disk was full, want at most %d", walAtFull, walAfter, bound)
	}

	closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, path, sqlitestore.Options{})
	rig.check(s2)
	s2.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check = %q, %v", ok, err)
	}
}
