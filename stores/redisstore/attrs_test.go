package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

// attrKeys returns the keys of the attribute indexes under the store's
// prefix, sorted. SCAN is fine here: it is a test's look at the keys.
func attrKeys(t *testing.T, s *Store, c *redis.Client) []string {
	t.Helper()
	var out []string
	for _, p := range []string{"ae:", "an:", "at:", "as:"} {
		keys, err := c.Keys(context.Background(), globEscape(s.keys.prefix+p)+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, keys...)
	}
	slices.Sort(out)
	return out
}

// listAll pages through a listing and returns the IDs, failing on a
// page longer than the limit, a short page that is not the last, or a
// repeated run.
func listAll(t *testing.T, s *Store, q storage.ListRunsQuery) []string {
	t.Helper()
	var ids []string
	seen := map[string]bool{}
	for range 10000 {
		page, err := s.ListRuns(context.Background(), q)
		if err != nil {
			t.Fatalf("ListRuns(%+v): %v", q, err)
		}
		if len(page.Runs) > q.PageSize() || page.Next != "" && len(page.Runs) != q.PageSize() {
			t.Fatalf("ListRuns(%+v) = %d runs, next %q", q, len(page.Runs), page.Next)
		}
		for _, r := range page.Runs {
			if seen[r.ID] {
				t.Fatalf("ListRuns(%+v) listed %q twice", q, r.ID)
			}
			seen[r.ID] = true
			ids = append(ids, r.ID)
		}
		if page.Next == "" {
			return ids
		}
		q.After = page.Next
	}
	t.Fatalf("ListRuns(%+v) does not end", q)
	return nil
}

// TestAttrListing compares listings by attributes, in creation order and
// of top-level runs, every plan of find.lua forced in turn (and the
// judged one, and walks that spend their budget at once and sort the
// rest), with strings compared by Lua's < and byte by byte, with
// the listing the contract describes, computed from every run with
// ListRunsQuery.Listed: 240 runs of mixed IDs, workflows, queues,
// statuses, parents, creation times (many shared) and attributes, and
// random queries over them.
func TestAttrListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, _ := newTestStore(t, clock)
	rng := rand.New(rand.NewPCG(35, 7))
	base := clock.Now()
	prefixes := []string{"r-", "R-", "r_", "r\u00e9", "r~"}
	var all []string
	var tops []string
	for i := 0; i < 240; {
		n := 1 + rng.IntN(5)
		batch := make([]storage.NewRun, 0, n)
		for range n {
			id := fmt.Sprintf("%s%03d", prefixes[rng.IntN(len(prefixes))], rng.IntN(1000))
			if slices.Contains(all, id) {
				continue
			}
			r := storage.NewRun{ID: id, Workflow: []string{"wa", "wb", "wc"}[rng.IntN(3)]}
			if len(tops) > 5 && rng.IntN(4) == 0 {
				r.ParentID = tops[rng.IntN(len(tops))]
			}
			if rng.IntN(4) == 0 {
				r.Queue = "slow"
			}
			if rng.IntN(5) < 4 {
				r.Attributes = append(r.Attributes, storage.StringAttr("cust", []string{"C-1", "C-10", "C-2", "D-1", "c-1"}[rng.IntN(5)]))
			}
			if rng.IntN(10) < 7 {
				r.Attributes = append(r.Attributes, storage.NumberAttr("total", []float64{-1.5, 0, 2, 10, 10.5, 100, 1e6}[rng.IntN(7)]))
			}
			if rng.IntN(2) == 0 {
				r.Attributes = append(r.Attributes, storage.TimeAttr("at", base.Add(time.Duration(rng.IntN(48))*time.Hour+time.Duration(rng.IntN(3))*time.Microsecond)))
			}
			if rng.IntN(2) == 0 {
				r.Attributes = append(r.Attributes, storage.BoolAttr("vip", rng.IntN(2) == 0))
			}
			switch rng.IntN(3) {
			case 0:
				r.Attributes = append(r.Attributes, storage.StringAttr("mixed", "1"))
			case 1:
				r.Attributes = append(r.Attributes, storage.NumberAttr("mixed", 1))
			}
			batch = append(batch, r)
			all = append(all, id)
			if r.ParentID == "" {
				tops = append(tops, id)
			}
			i++
		}
		mustCreate(t, s, batch...)
		clock.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
	}
	for _, id := range all {
		if rng.IntN(6) == 0 {
			if err := s.Pause(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	var runs []storage.RunRecord
	for _, id := range all {
		r, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	end := clock.Now()

	filters := [][]storage.AttrFilter{
		nil,
		{{Op: storage.OpEq, Value: storage.StringAttr("cust", "C-1")}},
		{{Op: storage.OpPrefix, Value: storage.StringAttr("cust", "C-1")}},
		{{Op: storage.OpPrefix, Value: storage.StringAttr("cust", "C-")}, {Op: storage.OpEq, Value: storage.BoolAttr("vip", true)}},
		{{Op: storage.OpGe, Value: storage.NumberAttr("total", 2)}},
		{{Op: storage.OpGt, Value: storage.NumberAttr("total", 0)}, {Op: storage.OpLe, Value: storage.NumberAttr("total", 100)}},
		{{Op: storage.OpLt, Value: storage.NumberAttr("total", 10.5)}, {Op: storage.OpEq, Value: storage.StringAttr("cust", "D-1")}},
		{{Op: storage.OpEq, Value: storage.NumberAttr("total", 10)}},
		{{Op: storage.OpEq, Value: storage.NumberAttr("total", 0)}},
		{{Op: storage.OpGe, Value: storage.TimeAttr("at", base.Add(10*time.Hour))}},
		{{Op: storage.OpLt, Value: storage.TimeAttr("at", base.Add(30*time.Hour))}, {Op: storage.OpGt, Value: storage.TimeAttr("at", base.Add(5*time.Hour))}},
		{{Op: storage.OpLe, Value: storage.Attr{Name: "at", Type: storage.AttrTime, Time: base.Add(20*time.Hour + 1500*time.Nanosecond)}}},
		{{Op: storage.OpGe, Value: storage.Attr{Name: "at", Type: storage.AttrTime, Time: base.Add(20*time.Hour + 500*time.Nanosecond)}}},
		{{Op: storage.OpEq, Value: storage.Attr{Name: "at", Type: storage.AttrTime, Time: base.Add(20*time.Hour + 500*time.Nanosecond)}}},
		{{Op: storage.OpEq, Value: storage.BoolAttr("vip", false)}},
		{{Op: storage.OpEq, Value: storage.NumberAttr("mixed", 1)}},
		{{Op: storage.OpEq, Value: storage.StringAttr("mixed", "1")}},
		{{Op: storage.OpEq, Value: storage.StringAttr("nope", "x")}},
	}
	for _, r := range runs {
		for _, a := range r.Attributes {
			if a.Name == "at" {
				filters = append(filters, []storage.AttrFilter{{Op: storage.OpEq, Value: a}})
				break
			}
		}
		if len(filters) > 20 {
			break
		}
	}
	type setting struct{ plan, bytes string }
	settings := []setting{{"", ""}, {"walk", ""}, {"eq", ""}, {"sort", ""}, {"spill", ""}, {"spill-eq", ""},
		{"", "1"}, {"walk", "1"}, {"sort", "1"}, {"spill", "1"}}
	nonEmpty := 0
	for i := range 100 {
		q := storage.ListRunsQuery{
			Where:      filters[rng.IntN(len(filters))],
			TopLevel:   rng.IntN(3) == 0,
			Descending: rng.IntN(2) == 0,
			Limit:      1 + rng.IntN(7),
		}
		if rng.IntN(3) > 0 {
			q.Order = storage.OrderCreated
		}
		switch rng.IntN(6) {
		case 0:
			q.Workflow = "wb"
		case 1:
			q.Status = storage.StatusPaused
		case 2:
			q.ParentID = tops[rng.IntN(6)]
		case 3:
			q.Queue = []string{"slow", storage.DefaultQueue}[rng.IntN(2)]
		case 4:
			q.IDPrefix = prefixes[rng.IntN(len(prefixes))]
		}
		if rng.IntN(4) == 0 {
			q.CreatedFrom = base.Add(time.Duration(rng.IntN(80)) * time.Millisecond)
		}
		if rng.IntN(4) == 0 {
			q.CreatedTo = end.Add(-time.Duration(rng.IntN(80)) * time.Millisecond)
		}
		if !q.CreatedTo.IsZero() && !q.CreatedTo.After(q.CreatedFrom) {
			q.CreatedFrom = time.Time{}
		}
		var want []storage.RunRecord
		for _, r := range runs {
			if q.Listed(&r) && (q.ParentID == "" || r.ParentID == q.ParentID) {
				want = append(want, r)
			}
		}
		slices.SortFunc(want, func(a, b storage.RunRecord) int {
			c := 0
			if q.Order == storage.OrderCreated {
				c = a.CreatedAt.Compare(b.CreatedAt)
			}
			c = cmp.Or(c, strings.Compare(a.ID, b.ID))
			if q.Descending {
				c = -c
			}
			return c
		})
		wantIDs := make([]string, len(want))
		for j, r := range want {
			wantIDs[j] = r.ID
		}
		if len(wantIDs) > 0 {
			nonEmpty++
		}
		for _, st := range settings {
			s.findPlan, s.findBytes = st.plan, st.bytes
			if got := listAll(t, s, q); !slices.Equal(got, wantIDs) {
				t.Fatalf("query %d %+v, plan %q, bytes %q:\n got %q\nwant %q", i, q, st.plan, st.bytes, got, wantIDs)
			}
		}
	}
	if nonEmpty < 50 {
		t.Fatalf("only %d of 100 queries list any run: the case tests too little", nonEmpty)
	}
	t.Logf("%d of 100 queries list runs", nonEmpty)
}

// TestAttributesKept: a run's attributes are stored normalized at its
// creation and indexed; a checkpoint's merge replaces and adds, keeping
// the indexes in step (a value changed leaves its old entries); a merge
// over the limit is refused with nothing written, unless the checkpoint
// existed; a restart and a continue-as-new keep them; a replacing create
// gives the new run its own; purge deletes every index entry.
func TestAttributesKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, c := newTestStore(t, clock)
	placed := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", Attributes: []storage.Attr{
		storage.NumberAttr("total", 12.5), {Name: "placed", Type: storage.AttrTime, Time: placed, Str: "ignored"},
		storage.StringAttr("cust", "C:7\nx"), storage.BoolAttr("vip", true), storage.NumberAttr("neg", -0.0),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []storage.Attr{
		storage.StringAttr("cust", "C:7\nx"), storage.NumberAttr("neg", 0),
		storage.TimeAttr("placed", placed), storage.NumberAttr("total", 12.5), storage.BoolAttr("vip", true),
	}
	if got := res[0].Run.Attributes; !slices.EqualFunc(got, want, storage.Attr.Equal) || !got[2].Time.Equal(placed.Truncate(time.Microsecond)) || got[2].Time.Location() != time.UTC {
		t.Fatalf("created run's attributes = %+v, want %+v", got, want)
	}
	if got := attrKeys(t, s, c); len(got) != 9 {
		t.Fatalf("attribute index keys after the create: %q, want 9 (5 equality, 4 range or prefix)", got)
	}
	if n := c.ZScore(ctx, s.keys.attrEqual(storage.NumberAttr("neg", 0)), "r").Val(); n != float64(clock.Now().UnixMicro()) {
		t.Fatalf("equality index scores the run %v, want its creation", n)
	}

	cl := mustClaimOne(t, s, "wf")
	step := func(key string, attrs ...storage.Attr) storage.CheckpointRequest {
		return storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute, Attributes: attrs,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindAttr}}
	}
	if _, err := s.Checkpoint(ctx, step("a1", storage.StringAttr("cust", "C-8"), storage.NumberAttr("total", 12.5), storage.StringAttr("new", "n"))); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetRun(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	want = []storage.Attr{
		storage.StringAttr("cust", "C-8"), storage.NumberAttr("neg", 0), storage.StringAttr("new", "n"),
		storage.TimeAttr("placed", placed), storage.NumberAttr("total", 12.5), storage.BoolAttr("vip", true),
	}
	if !slices.EqualFunc(rec.Attributes, want, storage.Attr.Equal) {
		t.Fatalf("attributes after the merge = %+v, want %+v", rec.Attributes, want)
	}
	if n := c.Exists(ctx, s.keys.attrEqual(storage.StringAttr("cust", "C:7\nx"))).Val(); n != 0 {
		t.Fatal("the replaced value is left in its equality index")
	}
	if got := c.ZRange(ctx, s.keys.attrStrings("cust"), 0, -1).Val(); !slices.Equal(got, []string{"C-8\x00r"}) {
		t.Fatalf("prefix index of cust = %q", got)
	}

	// Over the limit: refused, nothing written; the same request once the
	// checkpoint exists is Existing.
	var many []storage.Attr
	for i := range storage.MaxAttributes - 5 {
		many = append(many, storage.NumberAttr(fmt.Sprintf("n%02d", i), float64(i)))
	}
	before := snapshot(t, s, c)
	if _, err := s.Checkpoint(ctx, step("a2", many...)); !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "33 attributes") {
		t.Fatalf("Checkpoint over the limit: %v, want ErrInvalidArgument naming 33 attributes", err)
	}
	if after := snapshot(t, s, c); !maps.Equal(before, after) {
		t.Fatal("a refused merge wrote something")
	}
	if _, err := s.Checkpoint(ctx, step("a2", many[:3]...)); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Checkpoint(ctx, step("a2", many...)); err != nil || res.Existing == nil {
		t.Fatalf("replayed Checkpoint over the limit = %+v, %v; want Existing", res, err)
	}
	// A lease lost is heard before the limit.
	lost := step("a3", many...)
	lost.Lease.Token++
	if _, err := s.Checkpoint(ctx, lost); !errors.Is(err, storage.ErrLeaseLost) {
		t.Fatalf("Checkpoint over the limit under a lost lease: %v, want ErrLeaseLost", err)
	}

	if err := s.ContinueAsNew(ctx, storage.ContinueRequest{Lease: cl.Lease, Input: []byte("next")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	rec2, err := s.GetRun(ctx, "r")
	if err != nil || rec2.Execution != 3 || len(rec2.Attributes) != 9 {
		t.Fatalf("after a continue-as-new and a restart: %+v, %v; want execution 3 with 9 attributes", rec2, err)
	}

	// A replacing create gives the new run its own attributes only.
	res, err = s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", OnExisting: storage.ExistingReplace,
		Replace: &storage.ReplaceTerms{Error: storage.ErrorInfo{Message: "replaced"}}, Attributes: []storage.Attr{storage.StringAttr("cust", "C-9")}}})
	if err != nil || !res[0].Created || !res[0].Replaced {
		t.Fatalf("replacing create = %+v, %v", res, err)
	}
	if got := res[0].Run.Attributes; len(got) != 1 || !got[0].Equal(storage.StringAttr("cust", "C-9")) {
		t.Fatalf("replacement's attributes = %+v", got)
	}
	if got := attrKeys(t, s, c); !slices.Equal(got, []string{s.keys.attrEqual(storage.StringAttr("cust", "C-9")), s.keys.attrStrings("cust")}) {
		t.Fatalf("attribute index keys after the replacement: %q", got)
	}

	// Purge deletes the run's entries, and its places by creation.
	if _, err := s.Terminate(ctx, storage.TerminateRequest{RunID: "r", Error: storage.ErrorInfo{Message: "x"}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if res, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: clock.Now(), Limit: 10}); err != nil || res.Runs != 1 {
		t.Fatalf("Purge = %+v, %v", res, err)
	}
	if got := attrKeys(t, s, c); len(got) != 0 {
		t.Fatalf("attribute index keys after the purge: %q", got)
	}
	if n := c.Exists(ctx, s.keys.indexCreated(), s.keys.indexWorkflowCreated("wf")).Val(); n != 0 {
		t.Fatal("the purged run is left in an index by creation")
	}
}

// TestAttrScripts: a plain checkpoint and an eager completion run the
// scripts they ran before attributes (checkpoint.lua, ride.lua); one that
// sets attributes runs interact.lua, completing the run too when asked.
func TestAttrScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, newClock())
	shas := &scriptShas{}
	c.AddHook(shas)
	mustCreate(t, s, storage.NewRun{ID: "r", Workflow: "wf"})
	cl := mustClaimOne(t, s, "wf")
	step := func(key string) storage.CheckpointRequest {
		return storage.CheckpointRequest{Lease: cl.Lease, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte("o")}}
	}
	shas.take()
	if _, err := s.Checkpoint(ctx, step("a")); err != nil {
		t.Fatal(err)
	}
	if got := shas.take(); !slices.Equal(got, []string{checkpointScript.Hash()}) {
		t.Fatalf("a plain checkpoint ran %q, want checkpoint.lua", got)
	}
	req := step("b")
	req.Attributes = []storage.Attr{storage.StringAttr("k", "v")}
	if _, err := s.Checkpoint(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := shas.take(); !slices.Equal(got, []string{interactScript.Hash()}) {
		t.Fatalf("a checkpoint with attributes ran %q, want interact.lua", got)
	}
	req = step("c")
	req.Attributes = []storage.Attr{storage.StringAttr("k", "w")}
	req.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte("out")}
	if res, err := s.Checkpoint(ctx, req); err != nil || !res.Completed {
		t.Fatalf("eager completion with attributes = %+v, %v", res, err)
	}
	if got := shas.take(); !slices.Equal(got, []string{interactScript.Hash()}) {
		t.Fatalf("an eager completion with attributes ran %q, want interact.lua", got)
	}
	rec, err := s.GetRun(ctx, "r")
	if err != nil || rec.Status != storage.StatusComplete || len(rec.Attributes) != 1 || rec.Attributes[0].Str != "w" {
		t.Fatalf("GetRun = %+v, %v; want complete with k=w", rec, err)
	}
	page, err := s.ListRuns(ctx, storage.ListRunsQuery{Where: []storage.AttrFilter{{Op: storage.OpEq, Value: storage.StringAttr("k", "w")}}})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("ListRuns k=w = %+v, %v", page, err)
	}
}

// TestDebounceAttributes: a create that joins a debounce window gives
// the waiting run its input's attributes, unless it keeps the first
// input; the indexes follow.
func TestDebounceAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, newClock())
	start := func(v string, keep bool) storage.CreateResult {
		t.Helper()
		var attrs []storage.Attr
		if v != "" {
			attrs = []storage.Attr{storage.StringAttr("k", v)}
		}
		res, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r-" + v, Workflow: "wf", Attributes: attrs,
			Key: &storage.StartKey{Key: "k1", Debounce: time.Minute, KeepFirst: keep}}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	start("a", false)
	if res := start("b", false); !res.Joined || len(res.Run.Attributes) != 1 || res.Run.Attributes[0].Str != "b" {
		t.Fatalf("joined create = %+v", res)
	}
	if res := start("c", true); !res.Joined || res.Run.Attributes[0].Str != "b" {
		t.Fatalf("joined create keeping the first input = %+v", res)
	}
	if res := start("", false); !res.Joined || res.Run.Attributes != nil {
		t.Fatalf("joined create without attributes = %+v", res)
	}
	if got := attrKeys(t, s, c); len(got) != 0 {
		t.Fatalf("attribute index keys: %q, want none", got)
	}
}

// TestCreatedCursorGone: a page in creation order goes on from its
// cursor when the cursor's run has left the index walked since the page
// before (its attribute changed, or it was purged), among runs created
// at the same microsecond, ascending and descending.
func TestCreatedCursorGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s, _ := newTestStore(t, clock)
	v := []storage.Attr{storage.StringAttr("k", "v")}
	mustCreate(t, s, storage.NewRun{ID: "0", Workflow: "other", Attributes: v})
	clock.Advance(time.Millisecond)
	var runs []storage.NewRun
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		runs = append(runs, storage.NewRun{ID: id, Workflow: "wf", Attributes: v})
	}
	mustCreate(t, s, runs...)
	clock.Advance(time.Millisecond)
	mustCreate(t, s, storage.NewRun{ID: "z", Workflow: "other", Attributes: v})
	where := []storage.AttrFilter{{Op: storage.OpEq, Value: storage.StringAttr("k", "v")}}
	page := func(q storage.ListRunsQuery) storage.RunPage {
		t.Helper()
		p, err := s.ListRuns(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ids := func(p storage.RunPage) string {
		var out []string
		for _, r := range p.Runs {
			out = append(out, r.ID)
		}
		return strings.Join(out, " ")
	}
	// The cursors, taken while b and e are there.
	asc := storage.ListRunsQuery{Order: storage.OrderCreated, Where: where, Limit: 3}
	desc := asc
	desc.Descending = true
	ascNext, descNext := page(asc).Next, page(desc).Next
	if ascNext == "" || descNext == "" {
		t.Fatal("no cursor")
	}
	// b leaves k=v; e is purged.
	cl, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"wf"}, Limit: 10, LeaseFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cl {
		switch c.Lease.RunID {
		case "b":
			if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: c.Lease, LeaseFor: time.Minute,
				Checkpoint: storage.Checkpoint{Key: "x", Kind: storage.KindAttr}, Attributes: []storage.Attr{storage.StringAttr("k", "w")}}); err != nil {
				t.Fatal(err)
			}
		case "e":
			if err := s.Complete(ctx, storage.CompleteRequest{Lease: c.Lease, Status: storage.StatusComplete}); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock.Advance(time.Second)
	if res, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: clock.Now(), Limit: 10}); err != nil || res.Runs != 1 {
		t.Fatalf("Purge = %+v, %v", res, err)
	}
	for _, plan := range []string{"eq", "walk", "sort"} {
		s.findPlan = plan
		asc.After, desc.After = ascNext, descNext
		if got := ids(page(asc)); got != "c d f" {
			t.Errorf("plan %s: ascending page after b, gone from k=v: %q, want c d f", plan, got)
		}
		if got := ids(page(desc)); got != "d c a" {
			t.Errorf("plan %s: descending page after e, purged: %q, want d c a", plan, got)
		}
		// without the attribute filter, through the index by creation
		a, d := asc, desc
		a.Where, d.Where = nil, nil
		if got := ids(page(a)); got != "c d f" {
			t.Errorf("ascending page after b by creation: %q, want c d f", got)
		}
		if got := ids(page(d)); got != "d c b" {
			t.Errorf("descending page after e, purged, by creation: %q, want d c b", got)
		}
	}
}
