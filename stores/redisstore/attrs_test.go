package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
