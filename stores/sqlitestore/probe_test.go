package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// TestProbeCommits: the probe commits from one connection whatever it is
// asked for, in the store's synchronous mode, at a positive rate, while the
// store's writer goes on writing a run; it leaves no table behind and the
// log within its bound.
func TestProbeCommits(t *testing.T) {
	t.Parallel()
	for _, mode := range []sqlitestore.Synchronous{sqlitestore.SyncNormal, sqlitestore.SyncFull} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			path := dbPath(t)
			const maxWAL = 256 << 10
			s := open(t, path, sqlitestore.Options{Synchronous: mode, MaxWAL: maxWAL})
			if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf", Input: []byte(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			run := claimOne(t, s, "w", "wf")
			written := make(chan error, 1)
			go func() {
				for i := range 20 {
					key := fmt.Sprintf("s%d@v1", i)
					if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: run.Lease, LeaseFor: time.Minute,
						Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(`1`)}}); err != nil {
						written <- err
						return
					}
				}
				written <- nil
			}()
			p, err := s.ProbeCommits(ctx, 8, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if p.Commit != "one-row commits, synchronous="+mode.String() || p.Conns != 1 || p.Commits <= 0 || p.PerSecond() <= 0 || p.P50 <= 0 {
				t.Fatalf("probe %+v: want one-row commits in %s mode from 1 connection at a positive rate", p, mode)
			}
			t.Logf("%s: %.0f/s, p50 %v, p99 %v", p.Commit, p.PerSecond(), p.P50, p.P99)
			if err := <-written; err != nil {
				t.Fatalf("a checkpoint written during the probe: %v", err)
			}
			replay, err := s.LoadReplay(ctx, "r1")
			if err != nil || len(replay.Checkpoints) != 20 {
				t.Fatalf("the run after the probe: %d checkpoints, %v; want the 20 written", len(replay.Checkpoints), err)
			}
			assertNoProbeTable(t, path)
			if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > maxWAL {
				t.Fatalf("the log is %d bytes after the probe, over MaxWAL %d", fi.Size(), maxWAL)
			}
		})
	}
}

// TestProbeCommitsRefused: bad arguments, a read-only store and a closed
// one are refused, and a probe its context ends drops its table too.
func TestProbeCommitsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path, sqlitestore.Options{})
	for _, c := range []struct {
		conns int
		d     time.Duration
	}{{0, time.Second}, {1, 0}, {1, -time.Second}} {
		if _, err := s.ProbeCommits(ctx, c.conns, c.d); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Fatalf("ProbeCommits(%d, %v) = %v, want ErrInvalidArgument", c.conns, c.d, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.ProbeCommits(short, 1, time.Minute); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), path) {
		t.Fatalf("ProbeCommits cut short by its context = %v, want DeadlineExceeded naming the file", err)
	}
	assertNoProbeTable(t, path)

	ro := open(t, path, sqlitestore.Options{ReadOnly: true})
	if _, err := ro.ProbeCommits(ctx, 1, time.Second); !errors.Is(err, sqlitestore.ErrReadOnly) {
		t.Fatalf("ProbeCommits on a read-only store = %v, want ErrReadOnly", err)
	}
	s.Close()
	if _, err := s.ProbeCommits(ctx, 1, time.Second); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("ProbeCommits after Close = %v, want ErrClosed", err)
	}
}

// assertNoProbeTable fails the test if the file holds the probe's table.
func assertNoProbeTable(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'stem_probe'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("the probe left its table stem_probe behind")
	}
}
