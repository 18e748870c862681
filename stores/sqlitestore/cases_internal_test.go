package sqlitestore

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// A database written by schema version 2 is upgraded in place: a run
// parked on a wait of one case still is, without further cases, deadline
// or progress, and an Emit still reaches it; waits of several cases work
// on the upgraded file.
func TestMigrateFromVersion2(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 2)
	defer s.Close()
	n := time.Now().UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, wait_key, wait_topic, token, created_at, updated_at)
			VALUES (1, 'parked', 'wf', 'waiting', 'ev@v1', 'topic', 1, ?1, ?1)`, []any{n}},
		{`INSERT INTO run_data (ref, input) VALUES (1, x'01')`, nil},
		{`INSERT INTO executions (run_ref, number, started_at) VALUES (1, 1, ?1)`, []any{n}},
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES (2, 'queued', 'wf', 'queued', ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO run_data (ref) VALUES (2)`, nil},
		{`INSERT INTO executions (run_ref, number, started_at) VALUES (2, 1, ?1)`, []any{n}},
	})

	rec, err := s.GetRun(ctx, "parked")
	if err != nil || rec.Wait == nil || rec.Wait.Key != "ev@v1" || rec.Wait.Topic != "topic" || rec.Wait.Also != nil ||
		rec.Deadline != nil || rec.Progress != nil {
		t.Fatalf("GetRun(parked) = %+v (wait %+v), %v", rec, rec.Wait, err)
	}
	if ids, err := s.Emit(ctx, storage.EmitRequest{Topic: "topic", Payload: []byte(`1`)}); err != nil || !slices.Equal(ids, []string{"parked"}) {
		t.Fatalf("Emit = %v, %v; want parked", ids, err)
	}

	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 2, LeaseFor: time.Hour})
	if err != nil || len(got) != 2 {
		t.Fatalf("Claim = %v, %v; want both runs", got, err)
	}
	var l storage.Lease
	for _, c := range got {
		if c.Lease.RunID == "queued" {
			l = c.Lease
		}
	}
	w := &storage.Wait{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{{Key: "b@v1", Topic: "b"}}}
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, Wait: w}); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.Emit(ctx, storage.EmitRequest{Topic: "b", Payload: []byte(`2`)}); err != nil || !slices.Equal(ids, []string{"queued"}) {
		t.Fatalf("Emit(b) = %v, %v; want the run waiting on it in its second case", ids, err)
	}
}

// wait_topics holds the topics of the registered wait's further cases, and
// nothing else, whichever way the wait ends: the trigger runs_wait_also
// follows every statement that sets or clears wait_also.
func TestWaitTopicsFollowTheWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	topics := func() string {
		t.Helper()
		rows, err := s.rdb.QueryContext(ctx, `SELECT r.id || ':' || t.topic FROM wait_topics t JOIN runs r ON r.ref = t.run_ref ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	claim := func(id string) storage.Lease {
		t.Helper()
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{id}, Limit: 1, LeaseFor: time.Hour})
		if err != nil || len(got) != 1 {
			t.Fatalf("Claim(%s) = %v, %v", id, got, err)
		}
		return got[0].Lease
	}
	cases := &storage.Wait{Key: "a@v1", Topic: "a", Also: []storage.WaitCase{{Key: "b@v1", Topic: "b"}, {Key: "c@v1", Topic: "c"}}}
	// park registers the three cases; with ready, the run is claimable
	// with its wait still registered (an event wait's deadline come).
	park := func(id string, ready bool) storage.Lease {
		t.Helper()
		if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: id}}); err != nil {
			t.Fatal(err)
		}
		l := claim(id)
		req := storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, Wait: cases}
		if ready {
			past := time.Now().Add(-time.Second)
			req.ReadyAt = &past
		}
		if _, err := s.Suspend(ctx, req); err != nil {
			t.Fatal(err)
		}
		if want := id + ":b " + id + ":c"; topics() != want {
			t.Fatalf("wait_topics after parking %s = %q, want %q", id, topics(), want)
		}
		if ready {
			return claim(id)
		}
		return l
	}
	for _, c := range []struct {
		name string
		end  func(id string, l storage.Lease) error
	}{
		{"send", func(id string, _ storage.Lease) error {
			_, err := s.SendEvent(ctx, storage.Event{RunID: id, Topic: "a", Payload: []byte(`1`)})
			return err
		}},
		{"emit", func(string, storage.Lease) error {
			_, err := s.Emit(ctx, storage.EmitRequest{Topic: "c", Payload: []byte(`1`)})
			return err
		}},
		{"terminate", func(id string, _ storage.Lease) error {
			_, err := s.Terminate(ctx, storage.TerminateRequest{RunID: id, Error: storage.ErrorInfo{Message: "stop"}})
			return err
		}},
		{"restart", func(id string, _ storage.Lease) error { return s.Restart(ctx, storage.RestartRequest{RunID: id}) }},
	} {
		park(c.name, false)
		if err := c.end(c.name, storage.Lease{}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := topics(); got != "" {
			t.Fatalf("wait_topics after %s = %q, want none", c.name, got)
		}
	}
	for _, c := range []struct {
		name string
		end  func(l storage.Lease) error
	}{
		{"timeout", func(l storage.Lease) error {
			_, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Hour,
				Checkpoint: storage.Checkpoint{Key: "c@v1", Kind: storage.KindEvent, Error: &storage.ErrorInfo{Message: "timeout"}}})
			return err
		}},
		{"complete", func(l storage.Lease) error {
			return s.Complete(ctx, storage.CompleteRequest{Lease: l, Status: storage.StatusComplete})
		}},
		{"continue", func(l storage.Lease) error {
			return s.ContinueAsNew(ctx, storage.ContinueRequest{Lease: l, Input: []byte(`2`)})
		}},
		{"another-wait", func(l storage.Lease) error {
			_, err := s.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, Wait: &storage.Wait{Key: "d@v1", Topic: "d"}})
			return err
		}},
	} {
		l := park(c.name, true)
		if err := c.end(l); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := topics(); got != "" {
			t.Fatalf("wait_topics after %s = %q, want none", c.name, got)
		}
		if rec, err := s.GetRun(ctx, c.name); err != nil || (rec.Wait != nil && rec.Wait.Also != nil) {
			t.Fatalf("GetRun(%s) after it = %+v, %v; want no further cases", c.name, rec.Wait, err)
		}
	}
}

// Emit finds the runs waiting on a topic, in any case of their wait, by
// indexes alone, and a replay reads the current execution by the indexes
// that lead with (run, execution): no statement scans runs, checkpoints or
// attempts.
func TestIndexedPlans(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"emit", emitQuery, []string{"USING INDEX runs_wait_topic (wait_topic=?)", "SEARCH t USING PRIMARY KEY (topic=?)"}},
		{"replay", replayQuery, []string{"run_ref=? AND execution=?"}},
	} {
		plan := queryPlan(t, s, c.query, "x")
		all := strings.Join(plan, "\n")
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "INDEX") && !strings.Contains(line, "CO-ROUTINE") {
				t.Errorf("%s scans a table:\n%s", c.name, all)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s plan does not use %q:\n%s", c.name, w, all)
			}
		}
	}
}
