package p_test

import (
	"slices"
	"testing"
	"time"

	p "example.com/stemcase"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
)

// TestAttributes runs Fulfil: its run holds the attributes its start took
// from the input at the JSON paths the generated Register declares
// (promoted, nested, through pointers, a nil pointer setting nothing)
// and those the workflow set, and a listing finds it by them.
func TestAttributes(t *testing.T) {
	env := stemtest.New(t, p.RegisterWorkflows)
	placed := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	in := p.Order{
		Audit: p.Audit{Placed: placed, Source: "web"}, Meta: p.Meta{Channel: "mail"},
		ID: "o-1", Customer: &p.Customer{ID: "C-7", Tier: 2}, Total: 12.5, Count: 3, Region: "eu",
	}
	run, err := p.StartFulfil(env.Context(), env.Engine, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(env.Context()); err != nil {
		t.Fatal(err)
	}
	info, err := run.Info(env.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []runtime.Attr{
		runtime.StringAttr("channel", "mail"),
		runtime.NumberAttr("count", 3),
		runtime.StringAttr("customer", "C-7"),
		runtime.BoolAttr("flagged", false),
		runtime.StringAttr("order.id", "o-1"),
		runtime.TimeAttr("paid_at", env.Now()),
		runtime.TimeAttr("placed", placed),
		runtime.StringAttr("region", "eu"),
		runtime.NumberAttr("score", 25),
		runtime.StringAttr("source", "web"),
		runtime.StringAttr("stage", "charging"),
		runtime.NumberAttr("tier", 2),
		runtime.NumberAttr("total", 12.5),
	}
	got := slices.Clone(info.Attributes)
	if i := slices.IndexFunc(got, func(a runtime.Attr) bool { return a.Name == "paid_at" }); i >= 0 && !got[i].Time.IsZero() {
		got[i] = want[5] // set from the run's clock: only its presence is checked
	}
	if !slices.EqualFunc(got, want, runtime.Attr.Equal) {
		t.Errorf("attributes:\n got %v\nwant %v", info.Attributes, want)
	}
	where, err := env.Engine.ParseWhere(env.Context(), []string{"customer=C-7", "total>=10", "placed<2026-11-29"})
	if err != nil {
		t.Fatal(err)
	}
	runs, _, err := env.Engine.ListRuns(env.Context(), runtime.ListRunsQuery{Where: where})
	if err != nil || len(runs) != 1 || runs[0].ID != run.ID() {
		t.Errorf("ListRuns(%v) = %v, %v; want the run", where, runs, err)
	}
}
