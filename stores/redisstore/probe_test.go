package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// TestProbeCommits: the probe measures a positive rate from the
// connections asked for, while a run in the store goes on being written,
// and leaves the prefix's keys as they were: its counter is gone.
func TestProbeCommits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, c := newTestStore(t, nil)
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf", Input: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %d runs", err, len(claimed))
	}
	// The probe changes none; the checkpoints written meanwhile add theirs.
	want := append(prefixKeys(t, c, s.keys.prefix), s.keys.checkpoints("r1"))
	slices.Sort(want)
	written := make(chan error, 1)
	go func() {
		for i := range 20 {
			key := fmt.Sprintf("s%d@v1", i)
			if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: claimed[0].Lease, LeaseFor: time.Minute,
				Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(`1`)}}); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	p, err := s.ProbeCommits(ctx, 3, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if p.Conns != 3 || p.Commits <= 0 || p.PerSecond() <= 0 || p.P50 <= 0 || p.P99 < p.P50 {
		t.Fatalf("probe %+v: want commits from 3 connections at a positive rate", p)
	}
	if err := <-written; err != nil {
		t.Fatalf("a checkpoint written during the probe: %v", err)
	}
	replay, err := s.LoadReplay(ctx, "r1")
	if err != nil || len(replay.Checkpoints) != 20 {
		t.Fatalf("the run after the probe: %d checkpoints, %v; want the 20 written", len(replay.Checkpoints), err)
	}
	after := prefixKeys(t, c, s.keys.prefix)
	if slices.Sort(after); !slices.Equal(after, want) {
		t.Fatalf("keys under the prefix after the probe:\n%v\nwant:\n%v", after, want)
	}

	if _, err := s.ProbeCommits(ctx, 0, time.Second); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("ProbeCommits(0 connections) = %v, want ErrInvalidArgument", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.ProbeCommits(short, 1, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ProbeCommits cut short by its context = %v, want DeadlineExceeded", err)
	}
	if n := c.Exists(ctx, s.keys.probe()).Val(); n != 0 {
		t.Fatal("a probe cut short left its counter")
	}
}

// TestProbeCommitsWithinThePool: a probe asked for more connections than
// the client's pool holds commits from the pool's, and says so.
func TestProbeCommitsWithinThePool(t *testing.T) {
	t.Parallel()
	o, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	o.PoolSize = 2
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	prefix := testPrefix(t)
	cleanupPrefix(t, c, prefix)
	s, err := New(t.Context(), c, Options{Prefix: prefix, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.ProbeCommits(t.Context(), 5, 100*time.Millisecond)
	if err != nil || p.Conns != 2 || p.Commits <= 0 {
		t.Fatalf("ProbeCommits(5) with a pool of 2 = %+v, %v; want commits from 2 connections", p, err)
	}
	s.Close()
	if _, err := s.ProbeCommits(t.Context(), 1, time.Second); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("ProbeCommits after Close = %v, want ErrClosed", err)
	}
}
