package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// order is the input of the attribute tests' workflows.
type order struct {
	Customer struct {
		ID string `json:"id"`
	} `json:"customer"`
	Total  float64   `json:"total"`
	Placed time.Time `json:"placed"`
	Rush   bool      `json:"rush"`
}

func newOrder(customer string, total float64, placed string, rush bool) order {
	var o order
	o.Customer.ID, o.Total, o.Rush = customer, total, rush
	if placed != "" {
		t, err := time.Parse(time.DateOnly, placed)
		if err != nil {
			panic(err)
		}
		o.Placed = t
	}
	return o
}

// orderAttrs are the attributes of the order workflows: four from the
// input, one the workflow sets.
var orderAttrs = []runtime.AttrDecl{
	{Name: "customer", Type: runtime.AttrString, From: "customer.id"},
	{Name: "total", Type: runtime.AttrNumber, From: "total"},
	{Name: "placed", Type: runtime.AttrTime, From: "placed"},
	{Name: "rush", Type: runtime.AttrBool, From: "rush"},
	{Name: "stage", Type: runtime.AttrString},
}

// registerOrders registers "orders": it sets stage=packed, waits for
// orders.ship, sets stage=shipped and completes; "ticket", which
// completes at once; "ticket.event", which waits for ticket.go;
// "ticket.update", which answers one "note" update; "loose", which takes
// any JSON and completes; and "desk", which
// calls a ticket as its child for the customer D-9.
func registerOrders(t *testing.T) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		decl := runtime.WorkflowAttributes(orderAttrs...)
		must(t, runtime.Register(e, "orders", func(c *runtime.WorkflowContext, o order) (string, error) {
			if err := runtime.SetAttributes(c, runtime.StringAttr("stage", "packed")); err != nil {
				return "", err
			}
			if _, err := runtime.WaitForEvent[string](c, "ship", "orders.ship", 0); err != nil {
				return "", err
			}
			if err := runtime.SetAttributes(c, runtime.StringAttr("stage", "shipped")); err != nil {
				return "", err
			}
			return o.Customer.ID, nil
		}, decl))
		must(t, runtime.Register(e, "ticket", func(c *runtime.WorkflowContext, o order) (string, error) {
			return o.Customer.ID, nil
		}, decl))
		must(t, runtime.Register(e, "ticket.event", func(c *runtime.WorkflowContext, o order) (string, error) {
			return runtime.WaitForEvent[string](c, "go", "ticket.go", 0)
		}, decl))
		must(t, runtime.RegisterUpdate[string, string](e, "note", nil))
		must(t, runtime.Register(e, "ticket.update", func(c *runtime.WorkflowContext, o order) (string, error) {
			u, err := runtime.AwaitUpdate[string, string](c, "note", "note")
			if err != nil {
				return "", err
			}
			return u.Request, u.Reply(c, "noted "+u.Request)
		}, decl))
		// loose takes any JSON, so its attributes see what its type
		// would not let through.
		must(t, runtime.Register(e, "loose", func(c *runtime.WorkflowContext, in json.RawMessage) (string, error) {
			return "", nil
		}, decl))
		must(t, runtime.Register(e, "desk", func(c *runtime.WorkflowContext, _ int) (string, error) {
			return runtime.CallChild[string](c, "kid", "ticket", newOrder("D-9", 9, "", false))
		}))
	}
}

// attrsOf renders a run's attributes as name=value, sorted by name.
func attrsOf(t *testing.T, e *runtime.Engine, id string) string {
	t.Helper()
	info, err := e.Get(waitCtx(t), id)
	must(t, err)
	return renderAttrs(info.Attributes)
}

func renderAttrs(attrs []runtime.Attr) string {
	s := make([]string, len(attrs))
	for i, a := range attrs {
		s[i] = a.String()
	}
	return strings.Join(s, " ")
}

// listWhere lists the IDs of the runs the filters keep, in ID order.
func listWhere(t *testing.T, e *runtime.Engine, q runtime.ListRunsQuery, filters ...string) []string {
	t.Helper()
	ctx := waitCtx(t)
	where, err := e.ParseWhere(ctx, filters)
	must(t, err)
	q.Where = where
	runs, _, err := e.ListRuns(ctx, q)
	must(t, err)
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

// Attributes taken from each run's input and set by the workflow as it
// goes are what ListRuns filters find, with equality, ranges and prefix,
// combined; WithAttributes sets them over the input's.
func TestAttributesFilterRuns(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(time.Minute, registerOrders(t))
	start(t, e)
	ctx := waitCtx(t)
	for id, o := range map[string]order{
		"o-1": newOrder("C-7", 120, "2026-11-01", true),
		"o-2": newOrder("C-70", 80, "2026-11-20", false),
	} {
		_, err := runtime.Start[order, string](ctx, e, "orders", o, runtime.WithID(id))
		must(t, err)
	}
	_, err := runtime.Start[order, string](ctx, e, "orders", newOrder("D-1", 100, "2026-11-28", false),
		runtime.WithID("o-3"), runtime.WithAttributes(runtime.StringAttr("customer", "VIP-1")))
	must(t, err)
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		eventually(t, id+" waits", func() bool { return status(t, e, id) == runtime.StatusWaiting })
	}
	must(t, e.SendEvent(ctx, "o-1", "orders.ship", "now"))
	eventually(t, "o-1 completes", func() bool { return status(t, e, "o-1") == runtime.StatusComplete })

	if got, want := attrsOf(t, e, "o-1"), "customer=C-7 placed=2026-11-01T00:00:00Z rush=true stage=shipped total=120"; got != want {
		t.Fatalf("o-1's attributes: %s\nwant %s", got, want)
	}
	if got, want := attrsOf(t, e, "o-3"), "customer=VIP-1 placed=2026-11-28T00:00:00Z rush=false stage=packed total=100"; got != want {
		t.Fatalf("o-3's attributes: %s\nwant %s", got, want)
	}
	for _, c := range []struct {
		filters []string
		want    []string
	}{
		{[]string{"customer=C-7"}, []string{"o-1"}},
		{[]string{"customer^=C-7"}, []string{"o-1", "o-2"}},
		{[]string{"customer=VIP-1"}, []string{"o-3"}},
		{[]string{"customer=D-1"}, nil},
		{[]string{"total>=100"}, []string{"o-1", "o-3"}},
		{[]string{"total<100"}, []string{"o-2"}},
		{[]string{"total=80"}, []string{"o-2"}},
		{[]string{"placed<2026-11-15"}, []string{"o-1"}},
		{[]string{"placed>=2026-11-20T00:00:00Z"}, []string{"o-2", "o-3"}},
		{[]string{"rush=true"}, []string{"o-1"}},
		{[]string{"stage=packed"}, []string{"o-2", "o-3"}},
		{[]string{"stage=shipped"}, []string{"o-1"}},
		{[]string{"customer^=C", "total<100"}, []string{"o-2"}},
		{[]string{" stage =packed", "rush=false", "placed>2026-11-21"}, []string{"o-3"}},
	} {
		if got := listWhere(t, e, runtime.ListRunsQuery{}, c.filters...); !slices.Equal(got, c.want) {
			t.Errorf("runs where %q: %v, want %v", c.filters, got, c.want)
		}
	}
	// Newest first, a page at a time.
	q := runtime.ListRunsQuery{Order: storage.OrderCreated, Descending: true, Limit: 1}
	if got := listWhere(t, e, q, "stage=packed"); len(got) != 1 {
		t.Fatalf("a page of one run where stage=packed: %v", got)
	}
}

// Every way a run starts takes its attributes from its input: a batch
// (with an item's own over them), StartJSON on the registering engine
// and on one that knows the workflow from the catalog only,
// SendOrStart, UpdateOrStart, a child call, and a schedule's tick (its
// input sealed by the engine's codec).
func TestAttributesEveryStartPath(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	codec, err := runtime.NewAESGCMCodec(key)
	must(t, err)
	worker, err := runtime.New(runtime.Config{Store: f.store, PollInterval: 5 * time.Millisecond, Codec: codec, ShutdownGrace: 50 * time.Millisecond})
	must(t, err)
	registerOrders(t)(worker)
	start(t, worker)
	client, err := runtime.New(runtime.Config{Store: f.store, Codec: codec})
	must(t, err)
	t.Cleanup(func() { client.Close() })
	waitRecorded(t, client, "ticket")
	ctx := waitCtx(t)

	_, err = runtime.StartBatch[order, string](ctx, worker, "ticket", []runtime.BatchItem[order]{
		{ID: "batch-1", Input: newOrder("B-1", 1, "", false)},
		{ID: "batch-2", Input: newOrder("B-2", 2, "", false), Attributes: []runtime.Attr{runtime.StringAttr("stage", "vip")}},
	})
	must(t, err)
	in, err := json.Marshal(newOrder("J-1", 3, "", false))
	must(t, err)
	_, err = worker.StartJSON(ctx, "ticket", "json-here", in)
	must(t, err)
	in, err = json.Marshal(newOrder("J-2", 4, "", true))
	must(t, err)
	_, err = client.StartJSON(ctx, "ticket", "json-catalog", in, runtime.WithAttributes(runtime.StringAttr("stage", "by-name")))
	must(t, err)
	_, err = runtime.SendOrStart[order, string](ctx, worker, "ticket.event", "signal", newOrder("S-1", 5, "", false), "ticket.go", "go")
	must(t, err)
	reply, err := runtime.UpdateOrStart[order, string, string](ctx, worker, "ticket.update", "update", newOrder("U-1", 6, "", false), "note", "", "hi")
	must(t, err)
	if reply != "noted hi" {
		t.Fatalf("update-with-start replied %q", reply)
	}
	_, err = runtime.Start[int, string](ctx, worker, "desk", 0, runtime.WithID("desk"))
	must(t, err)
	_, err = schedule.Create(ctx, client, schedule.Spec{ID: "nightly", Workflow: "ticket", Cron: "@daily", Input: newOrder("N-1", 7, "", false), Paused: true})
	must(t, err)
	tick, err := schedule.Trigger(ctx, client, "nightly")
	must(t, err)

	for id, want := range map[string]string{
		"batch-1":      "customer=B-1 rush=false total=1",
		"batch-2":      "customer=B-2 rush=false stage=vip total=2",
		"json-here":    "customer=J-1 rush=false total=3",
		"json-catalog": "customer=J-2 rush=true stage=by-name total=4",
		"signal":       "customer=S-1 rush=false total=5",
		"update":       "customer=U-1 rush=false total=6",
		"desk/kid":     "customer=D-9 rush=false total=9",
		"desk":         "",
		tick:           "customer=N-1 rush=false total=7",
	} {
		eventually(t, id+" exists", func() bool {
			_, err := worker.Get(ctx, id)
			return err == nil
		})
		if got := attrsOf(t, worker, id); got != want {
			t.Errorf("run %s: attributes %q, want %q", id, got, want)
		}
	}
	// The parent's filter does not find its child, nor a top-level
	// listing the child.
	if got := listWhere(t, worker, runtime.ListRunsQuery{TopLevel: true}, "customer^=D-"); len(got) != 0 {
		t.Errorf("top-level runs of customer D-*: %v, want none (desk/kid is a child)", got)
	}
	if got := listWhere(t, worker, runtime.ListRunsQuery{}, "customer^=D-"); !slices.Equal(got, []string{"desk/kid"}) {
		t.Errorf("runs of customer D-*: %v, want [desk/kid]", got)
	}
}

// A workflow's declarations reach the catalog, and its types every
// engine's filters: AttrTypes knows them from the catalog on an engine
// that registers nothing.
func TestAttributesInCatalog(t *testing.T) {
	t.Parallel()
	f := setup(t)
	worker, _ := f.engine(time.Minute, registerOrders(t))
	start(t, worker)
	client, err := runtime.New(runtime.Config{Store: f.store})
	must(t, err)
	t.Cleanup(func() { client.Close() })
	w := waitRecorded(t, client, "orders")
	if !slices.Equal(w.Attributes, orderAttrs) {
		t.Fatalf("the catalog records orders' attributes %+v, want %+v", w.Attributes, orderAttrs)
	}
	if w := waitRecorded(t, client, "desk"); w.Attributes != nil {
		t.Fatalf("the catalog records desk's attributes %+v, want none", w.Attributes)
	}
	types, err := client.AttrTypes(waitCtx(t))
	must(t, err)
	want := map[string]runtime.AttrType{"customer": "string", "total": "number", "placed": "time", "rush": "bool", "stage": "string"}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("attribute types %v, want %v", types, want)
	}
	fs, err := client.ParseWhere(waitCtx(t), []string{"total>=1e3", "placed<2026-11-28"})
	must(t, err)
	if fs[0].Value.Type != runtime.AttrNumber || fs[0].Value.Num != 1000 || fs[1].Value.Type != runtime.AttrTime {
		t.Fatalf("filters read as %+v", fs)
	}
}

// A name two workflows declare with different types is left out of
// AttrTypes, and a filter on it is refused, naming both.
func TestAttributesDeclaredWithTwoTypes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(time.Minute, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "a", func(c *runtime.WorkflowContext, _ int) (int, error) { return 0, nil },
			runtime.WorkflowAttributes(runtime.AttrDecl{Name: "code", Type: runtime.AttrString}, runtime.AttrDecl{Name: "n", Type: runtime.AttrNumber})))
		must(t, runtime.Register(e, "b", func(c *runtime.WorkflowContext, _ int) (int, error) { return 0, nil },
			runtime.WorkflowAttributes(runtime.AttrDecl{Name: "code", Type: runtime.AttrNumber}, runtime.AttrDecl{Name: "n", Type: runtime.AttrNumber})))
	})
	ctx := waitCtx(t)
	types, err := e.AttrTypes(ctx)
	must(t, err)
	if _, ok := types["code"]; ok || types["n"] != runtime.AttrNumber {
		t.Fatalf("attribute types %v: want n a number and code left out", types)
	}
	_, err = e.ParseWhere(ctx, []string{"code=7"})
	if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "a string by a, a number by b") {
		t.Fatalf("filter on a name declared with two types: %v", err)
	}
}

// Bad declarations, attributes and filters are refused by the call that
// makes them, with ErrInvalidArgument saying what and where, and nothing
// is written.
func TestAttributesBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(time.Minute, registerOrders(t))
	start(t, e)
	ctx := waitCtx(t)
	noop := func(c *runtime.WorkflowContext, _ int) (int, error) { return 0, nil }
	decl := func(name string, typ runtime.AttrType, from string) runtime.RegisterOption {
		return runtime.WorkflowAttributes(runtime.AttrDecl{Name: name, Type: typ, From: from})
	}
	many := make([]runtime.AttrDecl, storage.MaxAttributes+1)
	for i := range many {
		many[i] = runtime.AttrDecl{Name: fmt.Sprintf("a%d", i), Type: runtime.AttrString}
	}
	registrations := []struct {
		name string
		opt  runtime.RegisterOption
		says string
	}{
		{"a bad name", decl("cust omer", runtime.AttrString, ""), "attribute name"},
		{"an over-long name", decl(strings.Repeat("n", storage.MaxAttrName+1), runtime.AttrString, ""), "attribute name"},
		{"an unknown type", decl("customer", "text", ""), `unknown type "text"`},
		{"a name twice", runtime.WorkflowAttributes(orderAttrs[0], orderAttrs[0]), "declared twice"},
		{"too many", runtime.WorkflowAttributes(many...), "33 attributes declared, over the limit of 32"},
		{"an empty path segment", decl("customer", runtime.AttrString, "customer..id"), `path "customer..id"`},
		{"a path ending in a dot", decl("customer", runtime.AttrString, "customer."), `path "customer."`},
	}
	for _, r := range registrations {
		err := runtime.Register(e, "bad."+strings.ReplaceAll(r.name, " ", "-"), noop, r.opt)
		if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), r.says) {
			t.Errorf("register with %s: %v; want ErrInvalidArgument saying %q", r.name, err, r.says)
		}
	}

	before, _, err := e.ListRuns(ctx, runtime.ListRunsQuery{})
	must(t, err)
	startJSON := func(input string, opts ...runtime.StartOption) func() error {
		return func() error {
			_, err := e.StartJSON(ctx, "loose", "", []byte(input), opts...)
			return err
		}
	}
	starts := []struct {
		name string
		call func() error
		says string
	}{
		{"a string where a number is declared", startJSON(`{"total":"120"}`),
			`workflow "loose": attribute total (a number) from input field "total": found the string "120", want a number`},
		{"a number where a string is declared", startJSON(`{"customer":{"id":7}}`),
			`attribute customer (a string) from input field "customer.id": found the number 7, want a string`},
		{"an object where a bool is declared", startJSON(`{"rush":{}}`), "found an object, want true or false"},
		{"a path through a string", startJSON(`{"customer":"C-7"}`), `found the string "C-7" at "customer", where an object holding "id" was expected`},
		{"a time that is not RFC 3339", startJSON(`{"placed":"28/11/2026"}`), "not a time in RFC 3339"},
		{"a number out of range", startJSON(`{"total":1e400}`), "the number 1e400, out of the range of a float64"},
		{"an oversize string", startJSON(`{"customer":{"id":"` + strings.Repeat("x", storage.MaxAttrString+1) + `"}}`),
			"a string of 257 bytes, over the limit of 256"},
		{"an undeclared WithAttributes", startJSON(`{}`, runtime.WithAttributes(runtime.StringAttr("custmer", "C-7"))),
			`workflow "loose" does not declare attribute custmer`},
		{"a WithAttributes of another type", startJSON(`{}`, runtime.WithAttributes(runtime.NumberAttr("customer", 7))),
			"attribute customer of workflow \"loose\" is declared a string, not a number"},
		{"an oversize WithAttributes", startJSON(`{}`, runtime.WithAttributes(runtime.StringAttr("customer", strings.Repeat("x", 300)))),
			"300 bytes long, over the limit of 256"},
		{"a WithAttributes with a bad name", startJSON(`{}`, runtime.WithAttributes(runtime.StringAttr("a b", "x"))), "attribute name"},
		{"a batch item's bad input", func() error {
			o := newOrder("C-1", 1, "", false)
			_, err := runtime.StartBatch[order, string](ctx, e, "ticket", []runtime.BatchItem[order]{
				{ID: "fine", Input: o}, {ID: "bad", Input: o, Attributes: []runtime.Attr{runtime.BoolAttr("total", true)}},
			})
			return err
		}, "run 1 of the batch"},
		{"a wrong type, on an engine that knows the workflow from the catalog", func() error {
			client, err := runtime.New(runtime.Config{Store: f.store})
			must(t, err)
			defer client.Close()
			waitRecorded(t, client, "loose")
			_, err = client.StartJSON(ctx, "loose", "", []byte(`{"rush":"yes"}`))
			return err
		}, `workflow "loose": attribute rush (a bool) from input field "rush": found the string "yes", want true or false`},
		{"a typed start's undeclared attribute", func() error {
			_, err := runtime.Start[order, string](ctx, e, "orders", order{}, runtime.WithAttributes(runtime.StringAttr("note", "x")))
			return err
		}, "does not declare attribute note"},
	}
	for _, s := range starts {
		err := s.call()
		if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), s.says) {
			t.Errorf("start with %s: %v\nwant ErrInvalidArgument saying %q", s.name, err, s.says)
		}
	}
	after, _, err := e.ListRuns(ctx, runtime.ListRunsQuery{})
	must(t, err)
	if len(after) != len(before) {
		t.Fatalf("refused starts created runs: %d runs before, %d after", len(before), len(after))
	}
	// A path the input lacks, or null, sets nothing.
	info, err := e.StartJSON(ctx, "loose", "sparse", []byte(`{"customer":null,"total":null}`))
	must(t, err)
	if len(info.Attributes) != 0 {
		t.Fatalf("a start whose input has no values: attributes %v", info.Attributes)
	}

	filters := []struct {
		text string
		says string
	}{
		{"custmer=C-7", `filter "custmer=C-7": no workflow declares attribute custmer (declared: customer, placed, rush, stage, total); did you mean "customer"?`},
		{"total>=abc", `filter "total>=abc"`},
		{"customer~C-7", `filter "customer~C-7": want NAME OP VALUE`},
		{"stage>packed", "compares only numbers and times"},
		{"total^=1", "prefix"},
		{"customer^=", "empty prefix"},
		{"rush=maybe", "true or false"},
		{"placed<yesterday", "is a time"},
		{"=C-7", "want NAME OP VALUE"},
		{"", "want NAME OP VALUE"},
	}
	for _, c := range filters {
		_, err := e.ParseWhere(ctx, []string{c.text})
		if !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("filter %q: %v\nwant ErrInvalidArgument saying %q", c.text, err, c.says)
		}
	}
	nine := slices.Repeat([]string{"stage=packed"}, storage.MaxAttrFilters+1)
	if _, err := e.ParseWhere(ctx, nine); !errors.Is(err, runtime.ErrInvalidArgument) || !strings.Contains(err.Error(), "over the limit of 8") {
		t.Errorf("nine filters: %v", err)
	}
}

// SetAttributes refuses, as an error the workflow gets and with nothing
// written, an attribute its workflow does not declare, one of another
// type, one out of bounds, and one that would take the run over
// storage.MaxAttributes.
func TestSetAttributesRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	errs := make(chan string, 8)
	e, probe := f.engine(time.Minute, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "setter", func(c *runtime.WorkflowContext, _ int) (string, error) {
			for _, attrs := range [][]runtime.Attr{
				{runtime.StringAttr("stage", "a"), runtime.StringAttr("colour", "red")},
				{runtime.NumberAttr("stage", 1)},
				{runtime.StringAttr("stage", strings.Repeat("x", 257))},
				{runtime.StringAttr("stage", "a"), runtime.StringAttr("stage", "b")},
				{runtime.StringAttr("stage", "fine")},
			} {
				err := runtime.SetAttributes(c, attrs...)
				if err != nil && !errors.Is(err, runtime.ErrInvalidArgument) {
					return "", err
				}
				errs <- fmt.Sprint(err)
			}
			return "done", nil
		}, runtime.WorkflowAttributes(runtime.AttrDecl{Name: "stage", Type: runtime.AttrString})))
	})
	start(t, e)
	ctx := waitCtx(t)
	run, err := runtime.Start[int, string](ctx, e, "setter", 0, runtime.WithID("s"))
	must(t, err)
	_, err = run.Result(ctx)
	must(t, err)
	for _, want := range []string{
		`workflow "setter" does not declare attribute colour (it declares stage)`,
		`attribute stage of workflow "setter" is declared a string, not a number`,
		"257 bytes long, over the limit of 256",
		"attribute stage is set twice",
		"<nil>",
	} {
		if got := <-errs; !strings.Contains(got, want) {
			t.Errorf("SetAttributes: %s\nwant %q", got, want)
		}
	}
	if got := attrsOf(t, e, "s"); got != "stage=fine" {
		t.Fatalf("attributes %q, want stage=fine", got)
	}
	var attrWrites []string
	for _, c := range probe.checkpointCalls() {
		if strings.HasPrefix(c.key, "attr:") {
			attrWrites = append(attrWrites, c.key)
		}
	}
	if !slices.Equal(attrWrites, []string{"attr:stage"}) {
		t.Fatalf("attribute writes %v, want the one that was not refused, keyed attr:stage", attrWrites)
	}

	// A run that holds MaxAttributes already (written by other code)
	// cannot take one more: the workflow gets the store's refusal.
	full := make([]storage.Attr, storage.MaxAttributes)
	for i := range full {
		full[i] = storage.StringAttr(fmt.Sprintf("old%02d", i), "x")
	}
	_, err = f.store.CreateRuns(ctx, []storage.NewRun{{ID: "full", Workflow: "setter", Input: []byte("0"), Attributes: full, Version: 1}})
	must(t, err)
	eventually(t, "the full run ends", func() bool { return status(t, e, "full").Finished() })
	for range 4 {
		<-errs
	}
	if got := <-errs; !strings.Contains(got, "the run would hold 33 attributes, over the limit of 32") {
		t.Fatalf("SetAttributes on a full run: %s", got)
	}
	info, err := e.Get(ctx, "full")
	must(t, err)
	if len(info.Attributes) != storage.MaxAttributes || slices.ContainsFunc(info.Attributes, func(a runtime.Attr) bool { return a.Name == "stage" }) {
		t.Fatalf("the full run's attributes changed: %s", renderAttrs(info.Attributes))
	}
}

// SetAttributes is a durable call: a replay of the run finds its
// checkpoint and writes nothing; one made from a defer when the run parks
// ends the goroutine without writing, and writes when the workflow
// returns; a run replayed by Engine.Replay does not diverge.
func TestSetAttributesReplaysWithoutWriting(t *testing.T) {
	t.Parallel()
	f := setup(t)
	register := func(e *runtime.Engine) {
		must(t, runtime.Register(e, "sleeper", func(c *runtime.WorkflowContext, _ int) (string, error) {
			defer func() { _ = runtime.SetAttributes(c, runtime.StringAttr("stage", "ended")) }()
			if err := runtime.SetAttributes(c, runtime.StringAttr("stage", "started"), runtime.NumberAttr("laps", 0)); err != nil {
				return "", err
			}
			for lap := 1; lap <= 3; lap++ {
				if err := c.Sleep("lap", time.Millisecond); err != nil {
					return "", err
				}
				if err := runtime.SetAttributes(c, runtime.NumberAttr("laps", float64(lap))); err != nil {
					return "", err
				}
			}
			return "done", nil
		}, runtime.WorkflowAttributes(runtime.AttrDecl{Name: "stage", Type: runtime.AttrString}, runtime.AttrDecl{Name: "laps", Type: runtime.AttrNumber})))
	}
	e, probe := f.engine(time.Minute, register)
	start(t, e)
	ctx := waitCtx(t)
	run, err := runtime.Start[int, string](ctx, e, "sleeper", 0, runtime.WithID("lapper"))
	must(t, err)
	_, err = run.Result(ctx)
	must(t, err)
	if got := attrsOf(t, e, "lapper"); got != "laps=3 stage=ended" {
		t.Fatalf("attributes %q, want laps=3 stage=ended", got)
	}
	// Each call written once, though the run replayed from the top after
	// each of its three sleeps.
	var writes []string
	for _, c := range probe.checkpointCalls() {
		if strings.HasPrefix(c.key, "attr:") {
			writes = append(writes, c.key)
		}
	}
	want := []string{"attr:stage", "attr:laps", "attr:laps#1", "attr:laps#2", "attr:stage#1"}
	if !slices.Equal(writes, want) {
		t.Fatalf("attribute writes %v, want %v", writes, want)
	}
	steps, err := e.ListSteps(ctx, "lapper", 0)
	must(t, err)
	var kinds []string
	for _, s := range steps {
		kinds = append(kinds, string(s.Kind))
	}
	if got := strings.Join(kinds, " "); got != "attr sleep attr sleep attr sleep attr attr" {
		t.Fatalf("steps %s", got)
	}
	rep, err := e.Replay(ctx, runtime.ReplayOptions{RunIDs: []string{"lapper"}, Workflows: []string{"sleeper"}})
	must(t, err)
	if rep.Replayed != 1 || len(rep.Divergences) != 0 {
		t.Fatalf("replay: %+v", rep)
	}
}

// Attributes set from a run started with one set are merged: a name set
// again takes the new value, the others stay, and a restart keeps them.
func TestAttributesKeptByRestart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(time.Minute, registerOrders(t))
	start(t, e)
	ctx := waitCtx(t)
	_, err := runtime.Start[order, string](ctx, e, "orders", newOrder("R-1", 10, "", false), runtime.WithID("r"))
	must(t, err)
	eventually(t, "r waits", func() bool { return status(t, e, "r") == runtime.StatusWaiting })
	must(t, e.Restart(ctx, "r"))
	eventually(t, "r waits again", func() bool {
		info, err := e.Get(ctx, "r")
		return err == nil && info.Execution == 2 && info.Status == runtime.StatusWaiting
	})
	if got := attrsOf(t, e, "r"); got != "customer=R-1 rush=false stage=packed total=10" {
		t.Fatalf("attributes after a restart %q", got)
	}
	if got := listWhere(t, e, runtime.ListRunsQuery{}, "customer=R-1"); !slices.Equal(got, []string{"r"}) {
		t.Fatalf("runs of R-1 after a restart: %v", got)
	}
}

// A workflow sets the run's search attributes as it goes, and callers
// find runs by them.
func ExampleSetAttributes() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	type Order struct {
		Customer string `json:"customer"`
		Total    float64
	}
	err = runtime.Register(engine, "orders.fulfil", func(c *runtime.WorkflowContext, o Order) (string, error) {
		if err := runtime.SetAttributes(c, runtime.StringAttr("stage", "packed")); err != nil {
			return "", err
		}
		return "shipped to " + o.Customer, nil
	}, runtime.WorkflowAttributes(
		runtime.AttrDecl{Name: "customer", Type: runtime.AttrString, From: "customer"},
		runtime.AttrDecl{Name: "total", Type: runtime.AttrNumber, From: "Total"},
		runtime.AttrDecl{Name: "stage", Type: runtime.AttrString},
	))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go engine.Run(ctx)

	for i, o := range []Order{{"C-7", 120}, {"C-70", 80}, {"D-1", 300}} {
		run, err := runtime.Start[Order, string](ctx, engine, "orders.fulfil", o, runtime.WithID(fmt.Sprintf("order-%d", i+1)))
		if err != nil {
			panic(err)
		}
		if _, err := run.Result(ctx); err != nil {
			panic(err)
		}
	}
	where, err := engine.ParseWhere(ctx, []string{"customer^=C-", "total>=100"})
	if err != nil {
		panic(err)
	}
	runs, _, err := engine.ListRuns(ctx, runtime.ListRunsQuery{Where: where})
	if err != nil {
		panic(err)
	}
	for _, r := range runs {
		fmt.Println(r.ID, r.Attributes)
	}
	// Output:
	// order-1 [customer=C-7 stage=packed total=120]
}
