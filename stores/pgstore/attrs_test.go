package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// sameAttrs reports whether got are want, normalized (sorted by name,
// times in UTC at the microsecond), nil for none.
func sameAttrs(got, want []storage.Attr) bool {
	want = storage.NormalizeAttrs(want)
	if len(got) != len(want) || (got == nil) != (want == nil) {
		return false
	}
	for i := range got {
		if !got[i].Equal(want[i]) || got[i].Time.Location() != time.UTC && !got[i].Time.IsZero() {
			return false
		}
	}
	return true
}

// attrRowCount counts the attribute rows of the runs, whatever their run.
func attrRowCount(t *testing.T, s *Store, runs ...string) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+s.schema+`.run_attrs WHERE run_id = ANY($1::text[])`, runs).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAttrsCreated: a run's attributes go in with it, normalized, and come
// back from the create, GetRun and ListRuns, values of every type byte
// for byte, whatever the session's time zone; of an ID given twice in one
// call the first request's attributes are the run's, and a create that
// finds the run returns the attributes it has.
func TestAttrsCreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	zone := time.FixedZone("far", 13*3600+45*60)
	attrs := []storage.Attr{
		storage.StringAttr("s", "ünïcode ✓"),
		storage.NumberAttr("n.tenth", 0.1),
		storage.NumberAttr("n.third", 1.0/3),
		storage.NumberAttr("n.big", math.MaxFloat64),
		storage.NumberAttr("n.tiny", -5e-324),
		storage.NumberAttr("n.int", 1<<53),
		{Name: "n.zero", Type: storage.AttrNumber, Num: math.Copysign(0, -1)},
		{Name: "t.ns", Type: storage.AttrTime, Time: time.Date(2026, 11, 28, 10, 0, 0, 123456789, zone)},
		storage.TimeAttr("t.first", time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)),
		storage.TimeAttr("t.last", time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)),
		storage.BoolAttr("b", true),
		storage.BoolAttr("b.no", false),
		storage.StringAttr("s.empty", ""),
	}
	res, err := s.CreateRuns(ctx, []storage.NewRun{
		{ID: "a", Workflow: "wf", Attributes: attrs},
		{ID: "plain", Workflow: "wf"},
		{ID: "a", Workflow: "wf", Attributes: []storage.Attr{storage.StringAttr("other", "x")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Created || !sameAttrs(res[0].Run.Attributes, attrs) {
		t.Fatalf("create of a: %+v", res[0].Run.Attributes)
	}
	if res[1].Run.Attributes != nil || res[2].Created || !sameAttrs(res[2].Run.Attributes, attrs) {
		t.Fatalf("creates of plain and of a again: %+v; %+v", res[1], res[2])
	}
	if n := attrRowCount(t, s, "a"); n != len(attrs) {
		t.Fatalf("%d attribute rows of a, want %d", n, len(attrs))
	}
	rec, err := s.GetRun(ctx, "a")
	if err != nil || !sameAttrs(rec.Attributes, attrs) {
		t.Fatalf("GetRun(a) = %+v, %v", rec.Attributes, err)
	}
	// A session in another time zone reads the same instants.
	err = pgx.BeginFunc(ctx, s.pool.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL TIME ZONE 'Asia/Kathmandu'`); err != nil {
			return err
		}
		far, err := scanRun(tx.QueryRow(ctx, s.q.getRun, "a"))
		if err == nil && !sameAttrs(far.Attributes, attrs) {
			err = fmt.Errorf("read in another time zone: %+v", far.Attributes)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if math.Signbit(rec.Attributes[slices.IndexFunc(rec.Attributes, func(a storage.Attr) bool { return a.Name == "n.zero" })].Num) {
		t.Fatal("a negative zero was stored")
	}
	page, err := s.ListRuns(ctx, storage.ListRunsQuery{})
	if err != nil || len(page.Runs) != 2 || !sameAttrs(page.Runs[0].Attributes, attrs) || page.Runs[1].Attributes != nil {
		t.Fatalf("ListRuns = %+v, %v", page, err)
	}
	again, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "a", Workflow: "wf"}})
	if err != nil || again[0].Created || !sameAttrs(again[0].Run.Attributes, attrs) {
		t.Fatalf("create of the existing a = %+v, %v", again, err)
	}
	// A leased create with attributes (createBoth), and one in an
	// application's transaction.
	leased, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "leased", Workflow: "wf", Lease: &storage.EagerLease{Owner: "w", For: time.Minute},
		Attributes: []storage.Attr{storage.NumberAttr("n", 7)}}})
	if err != nil || !leased[0].Created || leased[0].Run.Status != storage.StatusRunning || !sameAttrs(leased[0].Run.Attributes, []storage.Attr{storage.NumberAttr("n", 7)}) {
		t.Fatalf("leased create = %+v, %v", leased, err)
	}
	tx, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inTx, err := s.CreateRunsTx(ctx, tx.Tx(), []storage.NewRun{{ID: "tx", Workflow: "wf", Attributes: []storage.Attr{storage.BoolAttr("b", true)}}})
	if err != nil || !sameAttrs(inTx[0].Run.Attributes, []storage.Attr{storage.BoolAttr("b", true)}) {
		t.Fatalf("CreateRunsTx = %+v, %v", inTx, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := attrRowCount(t, s, "tx"); n != 0 {
		t.Fatalf("a rolled-back create left %d attribute rows", n)
	}
}

// TestAttrsCreatedWithPolicies: the creates that carry a start policy, an
// event or a key return the attributes of the run they create or find,
// and a replacement gives the run its new attributes, deleting the old
// ones and its descendants'.
func TestAttrsCreatedWithPolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	first := []storage.Attr{storage.StringAttr("customer", "c-1"), storage.NumberAttr("total", 10)}
	res, err := s.CreateRuns(ctx, []storage.NewRun{
		{ID: "r", Workflow: "wf", Attributes: first, OnExisting: storage.ExistingFail},
		{ID: "child", Workflow: "wf", ParentID: "r", Attributes: []storage.Attr{storage.StringAttr("customer", "c-1")}},
	})
	if err != nil || !res[0].Created || !sameAttrs(res[0].Run.Attributes, first) {
		t.Fatalf("create = %+v, %v", res, err)
	}
	refused, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", OnExisting: storage.ExistingFail,
		Attributes: []storage.Attr{storage.StringAttr("customer", "c-2")}}})
	if err != nil || refused[0].Refused != storage.RefusedExists || !sameAttrs(refused[0].Run.Attributes, first) {
		t.Fatalf("refused create = %+v, %v", refused, err)
	}
	second := []storage.Attr{storage.StringAttr("customer", "c-2")}
	replaced, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", OnExisting: storage.ExistingReplace, Replace: &storage.ReplaceTerms{}, Attributes: second}})
	if err != nil || !replaced[0].Replaced || !sameAttrs(replaced[0].Run.Attributes, second) {
		t.Fatalf("replacement = %+v, %v", replaced, err)
	}
	rec, err := s.GetRun(ctx, "r")
	if err != nil || !sameAttrs(rec.Attributes, second) {
		t.Fatalf("the replaced run: %+v, %v", rec.Attributes, err)
	}
	var created time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(created_at) FROM `+s.schema+`.run_attrs WHERE run_id = 'r'`).Scan(&created); err != nil || !created.Equal(rec.CreatedAt) {
		t.Fatalf("the new attributes' creation time %v, %v; want the new run's, %v", created, err, rec.CreatedAt)
	}
	if n := attrRowCount(t, s, "child"); n != 0 {
		t.Fatalf("the replaced run's child left %d attribute rows", n)
	}
	none, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf", OnExisting: storage.ExistingReplace, Replace: &storage.ReplaceTerms{}}})
	if err != nil || !none[0].Replaced || none[0].Run.Attributes != nil || attrRowCount(t, s, "r") != 0 {
		t.Fatalf("replacement without attributes = %+v, %v", none, err)
	}
	keyed, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "k", Workflow: "wf", Key: &storage.StartKey{Key: "one"}, Attributes: first}})
	if err != nil || !keyed[0].Created || !sameAttrs(keyed[0].Run.Attributes, first) {
		t.Fatalf("keyed create = %+v, %v", keyed, err)
	}
	joined, err := s.CreateRuns(ctx, []storage.NewRun{{ID: "k2", Workflow: "wf", Key: &storage.StartKey{Key: "one"}, Attributes: second}})
	if err != nil || !joined[0].Joined || !sameAttrs(joined[0].Run.Attributes, first) {
		t.Fatalf("joining create = %+v, %v", joined, err)
	}
}

// tracer records the SQL of every statement a pool sends, for tests that
// count them.
type tracer struct {
	mu  sync.Mutex
	sql []string
}

func (tr *tracer) record(sql string) {
	tr.mu.Lock()
	tr.sql = append(tr.sql, sql)
	tr.mu.Unlock()
}

// take returns the statements recorded since the last take.
func (tr *tracer) take() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := tr.sql
	tr.sql = nil
	return out
}

func (tr *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.record(d.SQL)
	return ctx
}

func (tr *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (tr *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (tr *tracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	tr.record(d.SQL)
}

func (tr *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// tracedStore is a store on a pool of its own that records every statement
// it sends.
func tracedStore(t *testing.T) (*Store, *tracer) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracer{}
	cfg.ConnConfig.Tracer = tr
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return newTestStoreOn(t, pool), tr
}

// newTestStoreOn is newTestStore on pool.
func newTestStoreOn(t *testing.T, pool *pgxpool.Pool) *Store {
	t.Helper()
	s, err := New(context.Background(), pool, Options{Schema: freshSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// claimOne creates a run with attrs and claims it.
func claimOne(t *testing.T, s *Store, id string, attrs ...storage.Attr) storage.Lease {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: id, Attributes: attrs}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{id}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim %s: %+v, %v", id, got, err)
	}
	return got[0].Lease
}

// TestAttrsCheckpointStatements: a checkpoint without attributes sends
// the one statement it sent before attributes existed; one with
// attributes sends the setAttrs statement after it, in the same batch,
// and the run's attributes are merged: a name set replaces its value and
// type, a new one is added.
func TestAttrsCheckpointStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, tr := tracedStore(t)
	l := claimOne(t, s, "run", storage.NumberAttr("total", 1), storage.StringAttr("keep", "k"))
	tr.take()
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "a@v1", Kind: storage.KindStep}}); err != nil {
		t.Fatal(err)
	}
	if got := tr.take(); len(got) != 1 || got[0] != s.q.checkpointOne {
		t.Fatalf("a plain checkpoint sent %d statements, want the one checkpoint statement:\n%s", len(got), strings.Join(got, "\n---\n"))
	}
	set := []storage.Attr{storage.StringAttr("total", "many"), storage.TimeAttr("placed", storetest.Start)}
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "b@v1", Kind: storage.KindAttr}, Attributes: set}); err != nil {
		t.Fatal(err)
	}
	if got := tr.take(); len(got) != 2 || got[0] != s.q.checkpointOne || got[1] != s.q.setAttrs {
		t.Fatalf("a checkpoint with attributes sent %d statements, want the checkpoint statement and setAttrs:\n%s", len(got), strings.Join(got, "\n---\n"))
	}
	rec, err := s.GetRun(ctx, "run")
	want := []storage.Attr{storage.StringAttr("keep", "k"), storage.TimeAttr("placed", storetest.Start), storage.StringAttr("total", "many")}
	if err != nil || !sameAttrs(rec.Attributes, want) {
		t.Fatalf("after the merge: %+v, %v; want %+v", rec.Attributes, err, want)
	}
	rp, err := s.LoadReplay(ctx, "run")
	if err != nil || len(rp.Checkpoints) != 2 || rp.Checkpoints[1].Kind != storage.KindAttr {
		t.Fatalf("replay: %+v, %v", rp, err)
	}
}

// TestAttrsCheckpointBatch: in one batch, a checkpoint with attributes is
// merged, one whose key existed merges nothing, one under a lost lease
// merges nothing, and a plain one is written; the batch's setAttrs
// statement carries only the checkpoints that carry attributes.
func TestAttrsCheckpointBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(storetest.Start)
	s := newTestStore(t, Options{Clock: clock})
	a, b, c, d := claimOne(t, s, "a"), claimOne(t, s, "b", storage.BoolAttr("x", false)), claimOne(t, s, "c"), claimOne(t, s, "d")
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: b, LeaseFor: time.Minute,
		Checkpoint: storage.Checkpoint{Key: "k@v1", Kind: storage.KindStep}}); err != nil {
		t.Fatal(err)
	}
	stale := c
	stale.Token++
	withAttrs := func(l storage.Lease, attrs ...storage.Attr) *ckptCall {
		call := stepCall(l, "k@v1", "out")
		call.req.Attributes = attrs
		return call
	}
	calls := []*ckptCall{
		withAttrs(a, storage.StringAttr("customer", "c-1"), storage.NumberAttr("total", 3)),
		withAttrs(b, storage.BoolAttr("x", true)),
		withAttrs(stale, storage.StringAttr("customer", "stale")),
		stepCall(d, "k@v1", "plain"),
	}
	s.writeBatch(calls)
	if calls[0].err != nil || calls[1].err != nil || calls[1].res.Existing == nil || !errors.Is(calls[2].err, storage.ErrLeaseLost) || calls[3].err != nil {
		t.Fatalf("results: %v %v %+v %v %v", calls[0].err, calls[1].err, calls[1].res, calls[2].err, calls[3].err)
	}
	for id, want := range map[string][]storage.Attr{
		"a": {storage.StringAttr("customer", "c-1"), storage.NumberAttr("total", 3)},
		"b": {storage.BoolAttr("x", false)},
		"c": nil,
		"d": nil,
	} {
		rec, err := s.GetRun(ctx, id)
		if err != nil || !sameAttrs(rec.Attributes, want) {
			t.Errorf("run %s: %+v, %v; want %+v", id, rec.Attributes, err, want)
		}
	}
}

// TestAttrsOverLimit: a merge that would leave the run more than
// MaxAttributes attributes is ErrInvalidArgument with nothing written,
// neither the checkpoint nor an attribute, on every path: alone, in a
// batch (whose other checkpoints are written), riding a completion (the
// run stays running), and in a transactional step (whose writes roll
// back). A merge that replaces names up to the limit is written.
func TestAttrsOverLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	full := make([]storage.Attr, storage.MaxAttributes-1)
	for i := range full {
		full[i] = storage.NumberAttr(fmt.Sprintf("a%02d", i), float64(i))
	}
	over := []storage.Attr{storage.StringAttr("a00", "replaced"), storage.StringAttr("new1", "x"), storage.StringAttr("new2", "y")}
	check := func(what string, l storage.Lease, err error) {
		t.Helper()
		if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "over the limit of 32") {
			t.Fatalf("%s: %v, want ErrInvalidArgument over the limit", what, err)
		}
		rec, gerr := s.GetRun(ctx, l.RunID)
		if gerr != nil || !sameAttrs(rec.Attributes, full) || rec.Status != storage.StatusRunning {
			t.Fatalf("%s: the run after the refusal: %s %+v, %v", what, rec.Status, rec.Attributes, gerr)
		}
		if cps, _ := checkpointsOf(ctx, s, l.RunID); len(cps) != 0 {
			t.Fatalf("%s: the refused checkpoint was written: %+v", what, cps)
		}
	}
	req := func(l storage.Lease) storage.CheckpointRequest {
		return storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute, Attributes: over,
			Checkpoint: storage.Checkpoint{Key: "set@v1", Kind: storage.KindAttr}}
	}

	alone := claimOne(t, s, "alone", full...)
	_, err := s.Checkpoint(ctx, req(alone))
	check("alone", alone, err)

	inBatch, other := claimOne(t, s, "batch", full...), claimOne(t, s, "other")
	calls := []*ckptCall{{req: req(inBatch), done: make(chan struct{})}, stepCall(other, "k@v1", "x")}
	s.writeBatch(calls)
	check("in a batch", inBatch, calls[0].err)
	if calls[1].err != nil {
		t.Fatalf("the other checkpoint of the batch: %v", calls[1].err)
	}
	if cps, err := checkpointsOf(ctx, s, other.RunID); err != nil || len(cps) != 1 {
		t.Fatalf("the other checkpoint of the batch was not written: %+v, %v", cps, err)
	}

	riding := claimOne(t, s, "riding", full...)
	r := req(riding)
	r.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Output: []byte(`"done"`)}
	_, err = s.Checkpoint(ctx, r)
	check("riding a completion", riding, err)

	notifying := claimOne(t, s, "notifying", full...)
	r = req(notifying)
	r.Complete = &storage.CompleteRequest{Status: storage.StatusComplete, Notify: &storage.Event{RunID: "other", Topic: "t"}}
	_, err = s.Checkpoint(ctx, r)
	check("completing with a notification", notifying, err)

	inTx := claimOne(t, s, "tx", full...)
	app := appTable(t, s)
	_, err = s.CheckpointTx(ctx, req(inTx), func(ctx context.Context, tx any) ([]byte, error) {
		_, err := tx.(pgx.Tx).Exec(ctx, `INSERT INTO `+s.schema+`.orders (id) VALUES ('written')`)
		return nil, err
	})
	check("in a transactional step", inTx, err)
	if app("written") {
		t.Fatal("the transactional step's write was kept")
	}

	fits := claimOne(t, s, "fits", full...)
	ok := []storage.Attr{storage.StringAttr("a00", "replaced"), storage.StringAttr("a01", "too"), storage.StringAttr("new", "x")}
	if _, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: fits, LeaseFor: time.Minute, Attributes: ok,
		Checkpoint: storage.Checkpoint{Key: "set@v1", Kind: storage.KindAttr}}); err != nil {
		t.Fatalf("a merge to exactly the limit: %v", err)
	}
	want, _ := storage.MergeAttrs(storage.NormalizeAttrs(full), ok)
	if rec, err := s.GetRun(ctx, "fits"); err != nil || len(rec.Attributes) != storage.MaxAttributes || !sameAttrs(rec.Attributes, want) {
		t.Fatalf("after a merge to the limit: %d attributes, %v", len(rec.Attributes), err)
	}
}

// TestAttrsEagerAndTx: the attributes a checkpoint carries are merged
// when it rides a completion, when it completes with a notification (a
// transaction of its own), and in a transactional step.
func TestAttrsEagerAndTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	set := []storage.Attr{storage.StringAttr("stage", "done")}
	for _, c := range []struct {
		name     string
		complete *storage.CompleteRequest
	}{
		{"riding", &storage.CompleteRequest{Status: storage.StatusComplete}},
		{"notifying", &storage.CompleteRequest{Status: storage.StatusComplete, Notify: &storage.Event{RunID: "riding", Topic: "t"}}},
	} {
		l := claimOne(t, s, c.name, storage.StringAttr("stage", "started"))
		res, err := s.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute, Attributes: set, Complete: c.complete,
			Checkpoint: storage.Checkpoint{Key: "last@v1", Kind: storage.KindStep}})
		if err != nil || !res.Completed {
			t.Fatalf("%s: %+v, %v", c.name, res, err)
		}
		if rec, err := s.GetRun(ctx, c.name); err != nil || rec.Status != storage.StatusComplete || !sameAttrs(rec.Attributes, set) {
			t.Fatalf("%s: the run: %s %+v, %v", c.name, rec.Status, rec.Attributes, err)
		}
	}
	l := claimOne(t, s, "tx", storage.StringAttr("stage", "started"))
	if _, err := s.CheckpointTx(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute, Attributes: set,
		Checkpoint: storage.Checkpoint{Key: "step@v1", Kind: storage.KindStep}}, func(context.Context, any) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.GetRun(ctx, "tx"); err != nil || !sameAttrs(rec.Attributes, set) {
		t.Fatalf("transactional step: %+v, %v", rec.Attributes, err)
	}
	// An existing checkpoint in a transactional step merges nothing.
	if res, err := s.CheckpointTx(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute, Attributes: []storage.Attr{storage.StringAttr("stage", "again")},
		Checkpoint: storage.Checkpoint{Key: "step@v1", Kind: storage.KindStep}}, func(context.Context, any) ([]byte, error) { return nil, nil }); err != nil || res.Existing == nil {
		t.Fatalf("the existing transactional checkpoint: %+v, %v", res, err)
	}
	if rec, err := s.GetRun(ctx, "tx"); err != nil || !sameAttrs(rec.Attributes, set) {
		t.Fatalf("after an existing transactional checkpoint: %+v, %v", rec.Attributes, err)
	}
}

// TestAttrsKept: Restart and ContinueAsNew keep a run's attributes; Purge
// deletes them with the run.
func TestAttrsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	attrs := []storage.Attr{storage.StringAttr("customer", "c-1")}
	l := claimOne(t, s, "run", attrs...)
	if err := s.ContinueAsNew(ctx, storage.ContinueRequest{Lease: l, Input: []byte(`2`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "run"}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.GetRun(ctx, "run")
	if err != nil || rec.Execution != 3 || !sameAttrs(rec.Attributes, attrs) {
		t.Fatalf("after continue-as-new and restart: execution %d, %+v, %v", rec.Execution, rec.Attributes, err)
	}
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"run"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, storage.CompleteRequest{Lease: got[0].Lease, Status: storage.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Purge(ctx, storage.PurgeRequest{FinishedBefore: time.Now().Add(time.Hour), Limit: 10}); err != nil || res.Runs != 1 {
		t.Fatalf("purge: %+v, %v", res, err)
	}
	if n := attrRowCount(t, s, "run"); n != 0 {
		t.Fatalf("the purged run left %d attribute rows", n)
	}
}

// TestRestartIfExecution: a conditional restart of a run in another
// execution is ErrConflict and writes nothing; in its execution, it
// restarts the run.
func TestRestartIfExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	claimOne(t, s, "run")
	before := rowOf(t, s, "run")
	err := s.Restart(ctx, storage.RestartRequest{RunID: "run", IfExecution: 2})
	if !errors.Is(err, storage.ErrConflict) || !strings.Contains(err.Error(), "execution 1, not 2") {
		t.Fatalf("restart of execution 2 = %v, want ErrConflict", err)
	}
	if after := rowOf(t, s, "run"); after != before {
		t.Fatalf("a refused restart changed the run:\n%s\n%s", before, after)
	}
	if execs, err := s.ListExecutions(ctx, "run"); err != nil || len(execs) != 1 {
		t.Fatalf("executions after a refused restart: %+v, %v", execs, err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "run", IfExecution: 1}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.GetRun(ctx, "run"); err != nil || rec.Execution != 2 {
		t.Fatalf("after the restart of execution 1: %+v, %v", rec, err)
	}
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "run", IfExecution: 1}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("a second restart of execution 1 = %v, want ErrConflict", err)
	}
}

// TestCheckpointInput: a checkpoint's input is kept byte for byte on
// every path that writes one (alone, in a batch, a sleep's park, a
// suspension's own transaction, a transactional step) and returned by
// ListSteps, and by a restart's copies; an existing checkpoint is
// reported with its input.
func TestCheckpointInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	raw := []byte{0, 1, 2, 0xff, '"'}
	l := claimOne(t, s, "run")
	step := func(key string, input []byte) storage.CheckpointRequest {
		return storage.CheckpointRequest{Lease: l, LeaseFor: time.Minute,
			Checkpoint: storage.Checkpoint{Key: key, Kind: storage.KindStep, Output: []byte(`1`), Input: input}}
	}
	if _, err := s.Checkpoint(ctx, step("alone@v1", raw)); err != nil {
		t.Fatal(err)
	}
	other := claimOne(t, s, "other")
	calls := []*ckptCall{{req: step("batch@v1", []byte(`{"a":1}`)), done: make(chan struct{})}, stepCall(other, "k@v1", "x")}
	s.writeBatch(calls)
	if calls[0].err != nil || calls[1].err != nil {
		t.Fatal(calls[0].err, calls[1].err)
	}
	if _, err := s.CheckpointTx(ctx, step("tx@v1", []byte(`"tx"`)), func(context.Context, any) ([]byte, error) { return []byte(`2`), nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint(ctx, step("empty@v1", nil)); err != nil {
		t.Fatal(err)
	}
	res, err := s.Checkpoint(ctx, step("alone@v1", []byte("other")))
	if err != nil || res.Existing == nil || string(res.Existing.Input) != string(raw) {
		t.Fatalf("the existing checkpoint: %+v, %v", res, err)
	}
	wake := time.Now().Add(time.Hour)
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Minute, ReadyAt: &wake,
		Checkpoint: &storage.Checkpoint{Key: "sleep@v1", Kind: storage.KindSleep, Output: []byte(`0`), Input: []byte(`"1h"`)}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"alone@v1": string(raw), "batch@v1": `{"a":1}`, "tx@v1": `"tx"`, "empty@v1": "", "sleep@v1": `"1h"`}
	checkSteps := func(what string, execution int) {
		t.Helper()
		h, err := s.ListSteps(ctx, storage.StepsQuery{RunID: "run", Execution: execution})
		if err != nil || len(h.Steps) != len(want) {
			t.Fatalf("%s: steps %+v, %v", what, h, err)
		}
		for _, st := range h.Steps {
			if string(st.Input) != want[st.Key] || (want[st.Key] == "") != (st.Input == nil) {
				t.Errorf("%s: step %s input %q, want %q", what, st.Key, st.Input, want[st.Key])
			}
		}
	}
	checkSteps("written", 1)
	if err := s.Restart(ctx, storage.RestartRequest{RunID: "run", FromKey: "sleep@v1"}); err != nil {
		t.Fatal(err)
	}
	delete(want, "sleep@v1")
	checkSteps("copied by a restart", 2)
	// A suspension's checkpoint written in its own transaction (with a
	// wait).
	got, err := s.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"run"}, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatal(err)
	}
	if _, err := s.Suspend(ctx, storage.SuspendRequest{Lease: got[0].Lease, LeaseFor: time.Minute,
		Checkpoint: &storage.Checkpoint{Key: "mark@v1", Kind: storage.KindStep, Input: []byte(`"in"`)},
		Wait:       &storage.Wait{Key: "ev@v1", Topic: "topic"}}); err != nil {
		t.Fatal(err)
	}
	want["mark@v1"] = `"in"`
	checkSteps("a suspension's", 2)
}

// TestCatalogAttributes: a workflow's declared attributes are kept in
// their order, and a workflow declaring none reads nil, also after it
// declared some.
func TestCatalogAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, Options{})
	decls := []storage.AttrDecl{{Name: "total", Type: storage.AttrNumber, From: "Total"}, {Name: "customer", Type: storage.AttrString, From: "Customer.ID"},
		{Name: "stage", Type: storage.AttrString}}
	put := func(wf string, d []storage.AttrDecl) {
		t.Helper()
		if err := s.PutCatalog(ctx, storage.Catalog{Workflows: []storage.WorkflowType{{Name: wf, Version: 1, Worker: "w", UpdatedAt: time.Now(), Attributes: d}}}); err != nil {
			t.Fatal(err)
		}
	}
	put("a", decls)
	put("b", nil)
	c, err := s.GetCatalog(ctx)
	if err != nil || len(c.Workflows) != 2 || !slices.Equal(c.Workflows[0].Attributes, decls) || c.Workflows[1].Attributes != nil {
		t.Fatalf("catalog: %+v, %v", c.Workflows, err)
	}
	put("a", nil)
	if c, err := s.GetCatalog(ctx); err != nil || c.Workflows[0].Attributes != nil {
		t.Fatalf("after declaring none: %+v, %v", c.Workflows, err)
	}
}
