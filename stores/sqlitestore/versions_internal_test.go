package sqlitestore

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// A database written by schema version 4 is upgraded in place: its runs,
// of whatever status and queue, read workflow version 0 (unknown), are
// listed by that version, and are claimed, recoveries too, by a claim
// whose Versions filter lists 0 and by none that leaves it out.
func TestMigrateFromVersion4(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 4)
	defer s.Close()
	now := time.Now()
	n := now.UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, created_at, updated_at) VALUES (1, 'queued', 'wf', 'queued', ?1, ?1, ?1)`, []any{n}},
		{`INSERT INTO runs (ref, id, workflow, status, owner, token, lease_until, first_claimed_at, created_at, updated_at)
			VALUES (2, 'expired', 'wf', 'running', 'w', 1, ?1, ?1, ?1, ?1)`, []any{n - int64(time.Minute)}},
		{`INSERT INTO runs (ref, id, workflow, status, ready_at, queue, priority, created_at, updated_at)
			VALUES (3, 'other', 'wf', 'queued', ?1, 'q', 5, ?1, ?1)`, []any{n}},
		{`INSERT INTO run_data (ref) VALUES (1), (2), (3)`, nil},
		{`INSERT INTO executions (run_ref, number, started_at) VALUES (1, 1, ?1), (2, 1, ?1), (3, 1, ?1)`, []any{n}},
	})

	ids := []string{"expired", "other", "queued"}
	for _, id := range ids {
		rec, err := s.GetRun(ctx, id)
		if err != nil || rec.Version != 0 {
			t.Fatalf("GetRun(%s) = %+v, %v; want version 0", id, rec, err)
		}
	}
	for _, c := range []struct {
		versions []int
		want     []string
	}{
		{nil, ids},
		{[]int{0}, ids},
		{[]int{1, 2}, nil},
	} {
		page, err := s.ListRuns(ctx, storage.ListRunsQuery{Versions: c.versions})
		var got []string
		for _, r := range page.Runs {
			got = append(got, r.ID)
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Fatalf("ListRuns(Versions %v) = %v, %v; want %v", c.versions, got, err, c.want)
		}
	}

	queues := []storage.Queue{{Name: storage.DefaultQueue}, {Name: "q"}}
	claim := func(versions map[string][]int) []storage.ClaimedRun {
		t.Helper()
		got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w2", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute,
			Queues: queues, Versions: versions})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := claim(map[string][]int{"wf": {1}}); len(got) != 0 {
		t.Fatalf("Claim of version 1 = %+v; want none of the stored runs", got)
	}
	wake, err := s.NextWake(ctx, storage.NextWakeRequest{Workflows: []string{"wf"}, Queues: []string{storage.DefaultQueue, "q"},
		Versions: map[string][]int{"wf": {1}}})
	if err != nil || wake.Found {
		t.Fatalf("NextWake of version 1 = %+v, %v; want none", wake, err)
	}
	// By priority, then the recovery before the ready run.
	got := claim(map[string][]int{"wf": {0, 1}})
	var claimed []string
	for _, cr := range got {
		if cr.Version != 0 {
			t.Errorf("claimed %s at version %d, want 0", cr.Lease.RunID, cr.Version)
		}
		claimed = append(claimed, cr.Lease.RunID)
	}
	if want := []string{"other", "expired", "queued"}; !slices.Equal(claimed, want) {
		t.Fatalf("Claim of versions 0 and 1 took %v, want %v", claimed, want)
	}
	if got[1].Recoveries != 1 {
		t.Fatalf("the expired run's claim = %+v, want its first recovery", got[1])
	}
}

// A claim takes exactly the runs storage.VersionIn allows, whichever form
// its versions filter takes (a CASE over a few workflows, JSON lists over
// more than eight) and whichever statements read the queue (one unlimited
// queue, or a limited one page by page); NextWake agrees.
func TestClaimVersionForms(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, c := range []struct {
		name      string
		workflows int
		queue     storage.Queue
	}{
		{"few", 3, storage.Queue{Name: storage.DefaultQueue}},
		{"few, limited", 3, storage.Queue{Name: "q", Concurrency: 1000}},
		{"many", 12, storage.Queue{Name: storage.DefaultQueue}},
		{"many, limited", 12, storage.Queue{Name: "q", Concurrency: 1000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := openTemp(t)
			// Workflow 0 has no entry (any version), workflow 1 an
			// empty one (none), the others some versions each.
			versions := map[string][]int{}
			var workflows []string
			var runs []storage.NewRun
			for i := range c.workflows {
				wf := "wf-" + string(rune('a'+i))
				workflows = append(workflows, wf)
				switch i {
				case 0:
				case 1:
					versions[wf] = []int{}
				default:
					versions[wf] = []int{0, i, storage.MaxVersion}
				}
				for _, v := range []int{0, 1, i, i + 1, storage.MaxVersion} {
					runs = append(runs, storage.NewRun{ID: wf + "-" + strconv.Itoa(v), Workflow: wf, Version: v, Queue: c.queue.Name})
				}
			}
			res, err := s.CreateRuns(ctx, runs)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, r := range res {
				if r.Created && storage.VersionIn(versions, r.Run.Workflow, r.Run.Version) {
					want = append(want, r.Run.ID)
				}
			}
			slices.Sort(want)
			wake, err := s.NextWake(ctx, storage.NextWakeRequest{Workflows: workflows, Queues: []string{c.queue.Name}, Versions: versions})
			if err != nil || !wake.Found || wake.After != 0 {
				t.Fatalf("NextWake = %+v, %v; want a run claimable now", wake, err)
			}
			got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: workflows, Limit: len(runs), LeaseFor: time.Minute,
				Queues: []storage.Queue{c.queue}, Versions: versions})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, cr := range got {
				ids = append(ids, cr.Lease.RunID)
				if !storage.VersionIn(versions, cr.Workflow, cr.Version) {
					t.Errorf("claimed %s of %s at version %d", cr.Lease.RunID, cr.Workflow, cr.Version)
				}
			}
			slices.Sort(ids)
			if !slices.Equal(ids, want) {
				t.Fatalf("Claim took %v, want %v", ids, want)
			}
			wake, err = s.NextWake(ctx, storage.NextWakeRequest{Workflows: workflows, Queues: []string{c.queue.Name}, Versions: versions})
			if err != nil || wake.Found && wake.After == 0 {
				t.Fatalf("NextWake after the claim = %+v, %v; want nothing claimable now", wake, err)
			}
		})
	}
}

// The claim statements are built again only when a request asks for other
// workflows or versions than the last; a caller changing its request's
// slices afterwards changes nothing built.
func TestClaimCache(t *testing.T) {
	t.Parallel()
	var c claimCache
	workflows, versions := []string{"a", "b"}, map[string][]int{"a": {0, 1}}
	first := c.get(workflows, versions)
	if first == nil {
		t.Fatal("no statements for a claimable request")
	}
	if got := c.get([]string{"a", "b"}, map[string][]int{"a": {0, 1}}); got != first {
		t.Fatal("an equal request built the statements again")
	}
	versions["a"][1] = 2
	workflows[1] = "c"
	if got := c.get([]string{"a", "b"}, map[string][]int{"a": {0, 1}}); got != first {
		t.Fatal("the caller's changes to its slices reached the cache")
	}
	for _, other := range []struct {
		workflows []string
		versions  map[string][]int
	}{
		{[]string{"a", "b"}, map[string][]int{"a": {0, 2}}},
		{[]string{"a", "b"}, map[string][]int{"a": {0, 1}, "b": {1}}},
		{[]string{"a", "b"}, nil},
		{[]string{"b", "a"}, map[string][]int{"a": {0, 1}}},
	} {
		got := c.get(other.workflows, other.versions)
		want := newClaimStmts(other.workflows, other.versions)
		if got == nil || got.def.one != want.def.one || !slices.Equal(got.wfArgs, want.wfArgs) {
			t.Fatalf("get(%v, %v) = %+v, want %+v", other.workflows, other.versions, got, want)
		}
	}
	if got := c.get([]string{"a"}, map[string][]int{"a": {}}); got != nil {
		t.Fatalf("a request whose filter leaves no workflow got statements %+v", got)
	}
	if got := c.get([]string{"a", "b"}, map[string][]int{"a": {}}); got == nil || !slices.Equal(got.wfArgs, []any{"b"}) {
		t.Fatalf("a request whose filter leaves b alone got %+v", got)
	}
}
