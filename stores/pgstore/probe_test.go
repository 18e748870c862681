package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestProbeCommits: the probe measures a positive rate from the
// connections asked for, while a run in the store goes on being written,
// and leaves no scratch table behind.
func TestProbeCommits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newTestStore(t, Options{})
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r1", Workflow: "wf", Input: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %d runs", err, len(claimed))
	}
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
	if p.Commit != "one-row commits" || p.Conns != 3 || p.Commits <= 0 || p.PerSecond() <= 0 || p.P50 <= 0 || p.P99 < p.P50 {
		t.Fatalf("probe %+v: want one-row commits from 3 connections at a positive rate", p)
	}
	if err := <-written; err != nil {
		t.Fatalf("a checkpoint written during the probe: %v", err)
	}
	replay, err := s.LoadReplay(ctx, "r1")
	if err != nil || len(replay.Checkpoints) != 20 {
		t.Fatalf("the run after the probe: %d checkpoints, %v; want the 20 written", len(replay.Checkpoints), err)
	}
	assertNoProbeTable(t, s)

	if _, err := s.ProbeCommits(ctx, 0, time.Second); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("ProbeCommits(0 connections) = %v, want ErrInvalidArgument", err)
	}
	if _, err := s.ProbeCommits(ctx, 1, -time.Second); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("ProbeCommits(-1s) = %v, want ErrInvalidArgument", err)
	}
	assertNoProbeTable(t, s)
}

// TestProbeCommitsWithinThePool: a probe asked for more connections than
// the pool holds commits from the pool's, and says so; a cancelled probe
// drops its table too.
func TestProbeCommitsWithinThePool(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := Open(context.Background(), url+sep+"pool_max_conns=2", Options{Schema: freshSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := s.ProbeCommits(t.Context(), 5, 100*time.Millisecond)
	if err != nil || p.Conns != 2 || p.Commits <= 0 {
		t.Fatalf("ProbeCommits(5) on a pool of 2 = %+v, %v; want commits from 2 connections", p, err)
	}
	assertNoProbeTable(t, s)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.ProbeCommits(ctx, 1, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ProbeCommits cut short by its context = %v, want DeadlineExceeded", err)
	}
	assertNoProbeTable(t, s)

	s.Close()
	if _, err := s.ProbeCommits(t.Context(), 1, time.Second); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("ProbeCommits after Close = %v, want ErrClosed", err)
	}
}

func assertNoProbeTable(t *testing.T, s *Store) {
	t.Helper()
	var gone bool
	if err := sharedPool(t).QueryRow(t.Context(), `SELECT to_regclass($1) IS NULL`, s.schema+"."+probeTable).Scan(&gone); err != nil {
		t.Fatal(err)
	}
	if !gone {
		t.Fatalf("the probe left %s.%s behind", s.schemaName, probeTable)
	}
}

// A stem_ parameter in the URL (storeurl's stem_schema, or a misspelling)
// is refused before anything is dialled, not sent to the server as a
// setting. Nothing listens on port 1.
func TestOpenRefusesStemParams(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://127.0.0.1:1/x?stem_shcema=a":          `unknown URL parameter "stem_shcema"; did you mean stem_schema?`,
		"postgres://127.0.0.1:1/x?stem_schema=a":          `unknown URL parameter "stem_schema" (Open passes no stem_ parameter to the server: set Options.Schema`,
		"postgres://127.0.0.1:1/x?stem_poolr=transaction": `unknown URL parameter "stem_poolr"; did you mean stem_pooler?`,
	} {
		_, err := Open(t.Context(), in, Options{ConnectTimeout: time.Second})
		if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v, want %q", in, err, want)
		}
	}
}
