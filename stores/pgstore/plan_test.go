package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// explain returns the plan of sql with args, in text form, read in a
// transaction that applies settings first.
func explain(t *testing.T, s *Store, settings []string, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	var plan []string
	err := pgx.BeginFunc(ctx, s.pool.Pool, func(tx pgx.Tx) error {
		for _, set := range settings {
			if _, err := tx.Exec(ctx, set); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	return strings.Join(plan, "\n")
}

// TestEmitFindsCasesByIndex: among many runs, Emit finds the runs waiting
// on its topic in a further case of their wait through runs_wait_also_idx,
// and those waiting on it in the first case through runs_wait_topic_idx:
// its cost does not grow with the runs that do not wait on the topic.
func TestEmitFindsCasesByIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	runs := make([]storage.NewRun, 5000)
	for i := range runs {
		runs[i] = storage.NewRun{ID: fmt.Sprintf("r%05d", i), Workflow: "wf"}
	}
	if _, err := s.CreateRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 40, LeaseFor: time.Minute})
	if err != nil || len(claimed) != 40 {
		t.Fatalf("claim: %d runs, %v", len(claimed), err)
	}
	for i, c := range claimed {
		w := &storage.Wait{Key: "a@v1", Topic: fmt.Sprintf("first-%d", i), Also: []storage.WaitCase{
			{Key: "b@v1", Topic: fmt.Sprintf("second-%d", i)},
			{Key: "c@v1", Topic: fmt.Sprintf("third-%d", i%4)},
		}}
		if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: c.Lease, LeaseFor: time.Minute, Wait: w}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+".runs"); err != nil {
		t.Fatal(err)
	}
	args := []any{nil, "third-1", []byte("x")}
	if s.notify {
		args = append(args, s.channel)
	}
	plan := explain(t, s, nil, s.q.emit, args...)
	for _, want := range []string{"runs_wait_also_idx", "runs_wait_topic_idx"} {
		if !strings.Contains(plan, want) {
			t.Errorf("emit's plan does not use %s:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "Seq Scan on runs") {
		t.Errorf("emit scans the runs:\n%s", plan)
	}
	ids, err := s.Emit(ctx, storage.EmitRequest{Topic: "third-1", Payload: []byte(`"x"`)})
	if err != nil || len(ids) != 10 {
		t.Fatalf("Emit(third-1) = %v, %v; want the 10 runs waiting on it in their third case", ids, err)
	}
}

// TestReplayReadsOneExecution: the replay's reads of checkpoints and
// attempts are bounded by the current execution in their index condition,
// not filtered out of every execution's rows, so a run continued as new
// many times replays as fast as a new one.
func TestReplayReadsOneExecution(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	// Index scans are forced: the question is which rows they read.
	plan := explain(t, s, []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"}, s.q.loadReplay, "run")
	lines := strings.Split(plan, "\n")
	for _, table := range []string{"checkpoints", "attempts"} {
		found := false
		for i, line := range lines {
			if !strings.Contains(line, " on "+table+" ") {
				continue
			}
			found = true
			var cond string
			for _, next := range lines[i+1:] {
				next = strings.TrimSpace(next)
				if !strings.HasPrefix(next, "Index Cond:") && !strings.HasPrefix(next, "Filter:") {
					break
				}
				if strings.HasPrefix(next, "Index Cond:") {
					cond = next
				}
			}
			if !strings.Contains(cond, "execution") {
				t.Errorf("replay reads %s without the execution in its index condition:\n%s", table, plan)
			}
		}
		if !found {
			t.Errorf("replay's plan reads no %s:\n%s", table, plan)
		}
	}
}
