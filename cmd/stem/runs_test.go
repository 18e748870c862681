package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
)

// order is the input of the "order" workflow, whose search attributes
// come from it.
type order struct {
	Customer string  `json:"customer"`
	Total    float64 `json:"total"`
}

// newOrdersFixture is a fixture whose engine also runs "order", which
// declares the attributes customer and total (taken from its input) and
// waits for an approval.
func newOrdersFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, fixtureConfig{run: true, register: func(t *testing.T, e *runtime.Engine) {
		err := runtime.Register(e, "order", func(c *runtime.WorkflowContext, o order) (string, error) {
			return runtime.WaitForEvent[string](c, "approval", "approval", 0)
		}, runtime.WorkflowAttributes(
			runtime.AttrDecl{Name: "customer", Type: runtime.AttrString, From: "customer"},
			runtime.AttrDecl{Name: "total", Type: runtime.AttrNumber, From: "total"},
		))
		if err != nil {
			t.Fatal(err)
		}
	}})
}

// startOrders starts runs of "order" one after another (so that their
// creation times differ) and waits until they wait.
func (f *fixture) startOrders(orders map[string]order, ids ...string) {
	f.t.Helper()
	for _, id := range ids {
		if _, err := runtime.Start[order, string](f.ctx, f.e, "order", orders[id], runtime.WithID(id)); err != nil {
			f.t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for _, id := range ids {
		waitStatus(f.t, f.e, id, runtime.StatusWaiting)
	}
}

// runIDs are the IDs a stem runs table lists, in order.
func runIDs(out string) string {
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] != "more:" {
			ids = append(ids, f[0])
		}
	}
	return strings.Join(ids, " ")
}

// stem runs lists newest first, or by ID; filters by search attributes
// read in their declared types, refusing a typo and a value of the wrong
// type; leaves children out with --top-level; and its "more:" line gives
// the next page in the same order. stem show prints a run's attributes.
func TestRunsByAttributeAndCreation(t *testing.T) {
	f := newOrdersFixture(t)
	orders := map[string]order{
		"o-b": {Customer: "C-7", Total: 120},
		"o-a": {Customer: "C-17", Total: 80},
		"o-c": {Customer: "D-1", Total: 300},
	}
	f.startOrders(orders, "o-b", "o-a", "o-c")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", "--workflow", "order"}, "o-c o-a o-b"},
		{[]string{"runs", "--workflow", "order", "--sort", "id"}, "o-a o-b o-c"},
		{[]string{"runs", "--where", "total>=100"}, "o-c o-b"},
		{[]string{"runs", "--where", "total>=100", "--where", "customer^=C-"}, "o-b"},
		{[]string{"runs", "--where", "customer=C-17"}, "o-a"},
		{[]string{"runs", "--where", "total<100", "--sort", "id"}, "o-a"},
	} {
		if out, _ := f.cli(0, c.args...); runIDs(out) != c.want {
			t.Errorf("stem %q lists %q, want %q:\n%s", c.args, runIDs(out), c.want, out)
		}
	}
	if out, _ := f.cli(0, "runs", "--where", "total>1000"); out != "no runs match\n" {
		t.Errorf("runs matching nothing: %q", out)
	}
	for _, c := range []struct {
		where, want string
	}{
		{"total>=lots", `attribute total is a number; "lots" is not one`},
		{"custmer=C-7", `did you mean "customer"?`},
		{"customer>C", "compares only numbers and times"},
	} {
		_, errOut := f.cli(2, "runs", "--where", c.where)
		if !strings.HasPrefix(errOut, "stem runs: --where: ") || !strings.Contains(errOut, c.want) {
			t.Errorf("runs --where %s: %s, want %q", c.where, errOut, c.want)
		}
	}

	// Pages newest first, each "more:" line the command of the next.
	var seen []string
	args := []string{"runs", "--workflow", "order", "--limit", "1"}
	for len(seen) < 4 {
		out, _ := f.cli(0, args...)
		seen = append(seen, runIDs(out))
		m := moreLine.FindStringSubmatch(out)
		if m == nil {
			break
		}
		next := strings.Fields(m[1])
		if next[0] != "stem" || next[1] != "--store" || next[3] != "runs" {
			t.Fatalf("more: %s", m[1])
		}
		args = next[3:]
	}
	if strings.Join(seen, " ") != "o-c o-a o-b" {
		t.Fatalf("pages newest first: %q", seen)
	}

	out, _ := f.cli(0, "show", "o-b")
	if !strings.Contains(out, "attributes customer=C-7  total=120\n") {
		t.Fatalf("show:\n%s", out)
	}
	out, _ = f.cli(0, "--json", "runs", "--where", "customer=C-7")
	var page struct {
		Runs []struct {
			ID         string
			Attributes map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Runs) != 1 || page.Runs[0].Attributes["customer"] != "C-7" || page.Runs[0].Attributes["total"] != 120.0 {
		t.Fatalf("runs --json: %s (%v)", out, err)
	}

	// --top-level leaves the children of a family out.
	if _, err := runtime.Start[int, string](f.ctx, f.e, "family", 1, runtime.WithID("fam")); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, "fam", runtime.StatusWaiting)
	all, _ := f.cli(0, "runs", "--sort", "id")
	top, _ := f.cli(0, "runs", "--sort", "id", "--top-level")
	if !strings.Contains(all, "fam/") || strings.Contains(top, "fam/") || !strings.Contains(top, "fam ") {
		t.Fatalf("runs:\n%s\nruns --top-level:\n%s", all, top)
	}
}

// A bulk action by a search attribute acts on the runs whose attribute
// matches, and no other.
func TestBulkByAttribute(t *testing.T) {
	f := newOrdersFixture(t)
	orders := map[string]order{}
	var ids []string
	for i := range 6 {
		id := fmt.Sprintf("o-%d", i)
		orders[id] = order{Customer: fmt.Sprintf("C-%d", i%2), Total: float64(i * 50)}
		ids = append(ids, id)
	}
	f.startOrders(orders, ids...)
	out, _ := f.cli(0, "bulk", "pause", "--where", "total>=100", "--where", "customer=C-1", "--yes")
	if !strings.Contains(out, "2 runs match: o-3, o-5\n") || !strings.HasSuffix(out, "  2 matched: 2 paused, 0 skipped, 0 failed done\n") {
		t.Fatalf("bulk pause by attribute:\n%s", out)
	}
	for _, id := range ids {
		want := runtime.StatusWaiting
		if id == "o-3" || id == "o-5" {
			want = runtime.StatusPaused
		}
		waitStatus(t, f.e, id, want)
	}
	if _, errOut := f.cli(2, "bulk", "pause", "--where", "totl>=100", "--yes"); !strings.Contains(errOut, `did you mean "total"?`) {
		t.Fatalf("bulk --where with a typo: %s", errOut)
	}
	out, _ = f.cli(0, "bulk", "list")
	if !strings.Contains(out, "where=total>=100 where=customer=C-1") {
		t.Fatalf("bulk list:\n%s", out)
	}
}
