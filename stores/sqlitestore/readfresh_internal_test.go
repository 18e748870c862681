package sqlitestore

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Every read started after a write returned sees that write, on whichever
// pooled read connection it runs, also while other reads on the same
// connections have their contexts cancelled at any moment: a cancelled read
// must not leave its connection inside a read transaction (an old WAL
// snapshot) for the next read to see the database as it was.
func TestReadsSeeEarlierWritesDespiteCancellation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{ReadConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.write(ctx, "setup", func(w *wtx) error {
		if _, err := w.exec(`CREATE TABLE fresh (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
			return err
		}
		_, err := w.exec(`INSERT INTO fresh (k, v) VALUES (1, 0)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	const writes = 500
	var written atomic.Int64 // the last value whose write returned
	// failures counts the reads that went wrong; the test stops after a
	// few, so that both kinds of failure can show.
	var failures atomic.Int64
	const maxFailures = 10
	failed := func() bool { return failures.Load() >= maxFailures }
	// readValue reads the value on a pooled connection; ok is false when
	// the read was cancelled.
	readValue := func(ctx context.Context, snapshot bool) (v int64, ok bool) {
		err := s.read(ctx, "fresh", snapshot, func(c *conn) error {
			found, err := c.queryRow(`SELECT v FROM fresh WHERE k = 1`, func(r row) { v = r.int64(0) })
			if err == nil && !found {
				t.Error("no row")
			}
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				failures.Add(1)
				t.Errorf("read (snapshot %v) with a live context: %v", snapshot, err)
			}
			return 0, false
		}
		return v, true
	}
	check := func(ctx context.Context, snapshot bool) {
		want := written.Load()
		if v, ok := readValue(ctx, snapshot); ok && v < want {
			failures.Add(1)
			t.Errorf("read (snapshot %v) saw %d after the write of %d returned", snapshot, v, want)
		}
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if failed() {
					return
				}
				rctx, cancel := context.WithCancel(ctx)
				// Cancel at a random point: before the read, while it
				// runs, or (on the last branch) never.
				switch n := rng.IntN(8); n {
				case 0:
					cancel()
				case 7:
				default:
					spins := rng.IntN(1 << (2 * n))
					go func() {
						for i := 0; i < spins && rctx.Err() == nil; i++ {
							runtime.Gosched()
						}
						cancel()
					}()
				}
				check(rctx, rng.IntN(2) == 0)
				cancel()
			}
		})
	}
	for i := int64(1); i <= writes && !failed(); i++ {
		if err := s.write(ctx, "bump", func(w *wtx) error {
			_, err := w.exec(`UPDATE fresh SET v = ? WHERE k = 1`, i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		written.Store(i)
		// A read on every connection of the pool, none cancelled.
		for range 2 * s.opts.ReadConns {
			check(ctx, i%2 == 0)
		}
	}
	close(stop)
	wg.Wait()
}

// A snapshot read that cannot end its transaction cleanly gives its
// connection up: the next reads, on a pool of one, run on a fresh one.
func TestReadDiscardsDoubtfulConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(filepath.Join(t.TempDir(), "stem.db"), Options{ReadConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var first *conn
	// f ends the transaction itself, so read's COMMIT and then its
	// ROLLBACK fail.
	err = s.read(ctx, "commit early", true, func(c *conn) error {
		first = c
		_, err := c.exec("COMMIT")
		return err
	})
	if err == nil {
		t.Fatal("read whose transaction was ended under it succeeded")
	}
	for _, snapshot := range []bool{false, true, false} {
		var again *conn
		err := s.read(ctx, "after", snapshot, func(c *conn) error {
			again = c
			_, err := c.queryRow("SELECT 1", func(row) {})
			return err
		})
		if err != nil {
			t.Fatalf("read (snapshot %v) after the discard: %v", snapshot, err)
		}
		if again == first {
			t.Fatalf("read (snapshot %v) ran on the discarded connection", snapshot)
		}
	}
}
