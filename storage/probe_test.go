package storage_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestMeasureCommits: every connection commits, first once untimed, then
// until the duration has passed; the result counts the timed commits only,
// with their latencies' percentiles.
func TestMeasureCommits(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	seen := make([]atomic.Int64, 3)
	p, err := storage.MeasureCommits(t.Context(), 3, 50*time.Millisecond, func(_ context.Context, conn int) error {
		calls.Add(1)
		seen[conn].Add(1)
		time.Sleep(time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Conns != 3 || p.Commits < 3 || p.Commits != calls.Load()-3 || p.Elapsed < 50*time.Millisecond {
		t.Fatalf("probe %+v after %d calls; want 3 connections, every call but the 3 untimed counted, at least 50ms", p, calls.Load())
	}
	for i := range seen {
		if seen[i].Load() < 2 {
			t.Fatalf("connection %d committed %d times, want its untimed commit and more", i, seen[i].Load())
		}
	}
	if p.P50 < time.Millisecond || p.P99 < p.P50 || p.PerSecond() <= 0 {
		t.Fatalf("probe %+v: want p50 ≥ 1ms ≤ p99 and a positive rate", p)
	}
}

// TestMeasureCommitsStopsAtTheFirstError: a failing commit ends the probe
// with its error, and bad arguments are refused before any commit.
func TestMeasureCommitsStopsAtTheFirstError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	var calls atomic.Int64
	_, err := storage.MeasureCommits(t.Context(), 2, time.Minute, func(context.Context, int) error {
		if calls.Add(1) > 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("MeasureCommits = %v, want the commit's error", err)
	}
	for _, c := range []struct {
		conns int
		d     time.Duration
	}{{0, time.Second}, {1, 0}, {1, -time.Second}} {
		_, err := storage.MeasureCommits(t.Context(), c.conns, c.d, func(context.Context, int) error {
			t.Fatal("committed with bad arguments")
			return nil
		})
		if !errors.Is(err, storage.ErrInvalidArgument) {
			t.Fatalf("MeasureCommits(%d, %v) = %v, want ErrInvalidArgument", c.conns, c.d, err)
		}
	}
}
