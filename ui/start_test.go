package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/internal/jsonschema"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// orderInput is the input of the start form's test workflow: a field of
// every kind the form makes.
type orderInput struct {
	Customer string     `json:"customer"`
	Total    float64    `json:"total"`
	Items    int32      `json:"items"`
	Rush     bool       `json:"rush"`
	Tags     []string   `json:"tags"`
	Due      *time.Time `json:"due"`
	Note     *string    `json:"note"`
	Gift     *bool      `json:"gift"`
}

// treeNode is a recursive input: its schema refers to its $defs.
type treeNode struct {
	Name string     `json:"name"`
	Kids []treeNode `json:"kids"`
}

// schemaOf is the schema an engine records for a Go type.
func schemaOf(t *testing.T, v any) json.RawMessage {
	t.Helper()
	s, err := jsonschema.For(reflect.TypeOf(v))
	must(t, err)
	return s
}

// record writes workflows into the store's catalog, as engines that run
// them do.
func (d *dash) record(ws ...storage.WorkflowType) {
	d.t.Helper()
	must(d.t, d.store.PutCatalog(context.Background(), storage.Catalog{Workflows: ws}))
}

// startForm is a dashboard with the start form's workflows recorded:
// orders.place (orderInput), count (an int) and manual (a schema written
// by hand, with required and enum).
func startForm(t *testing.T) *dash {
	d := newDash(t, false, nil)
	d.record(
		storage.WorkflowType{Name: "orders.place", Version: 2, InputSchema: schemaOf(t, orderInput{})},
		storage.WorkflowType{Name: "count", Version: 1, InputSchema: schemaOf(t, 0)},
		storage.WorkflowType{Name: "tree", Version: 1, InputSchema: schemaOf(t, treeNode{})},
		storage.WorkflowType{Name: "manual", Version: 1, InputSchema: json.RawMessage(
			`{"type":"object","required":["region"],"properties":{"region":{"type":"string","enum":["eu","us"],"description":"Where it ships from."},"count":{"type":"integer"}}}`)},
	)
	return d
}

// postStart posts the start form of workflow with the form's values, as
// an operator's browser on the form does.
func (d *dash) postStart(workflow string, form url.Values) *response {
	d.t.Helper()
	page := "/start?workflow=" + url.QueryEscape(workflow)
	cookie, token := d.session(page)
	form.Set("csrf", token)
	return d.post(page, form, cookie)
}

// fieldError is the error shown next to the field with the element ID
// id, "" when none.
func fieldError(body, id string) string {
	m := regexp.MustCompile(`<span id="` + regexp.QuoteMeta(id) + `-error" class="error field-error" role="alert">([^<]*)</span>`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return unescape(m[1])
}

// The start page lists the workflows the catalog records, and each one's
// form has a field per property of its input, of the kind its schema
// says, the browser's own checks (type, step, min, max, required) set.
func TestStartFormFields(t *testing.T) {
	t.Parallel()
	d := startForm(t)
	d.get("/start").want(t, http.StatusOK).contains(t,
		`<li data-workflow="orders.place"><a href="./start?workflow=orders.place">orders.place</a> <span class="ver">v2</span> <span class="note">8 fields</span></li>`,
		`<li data-workflow="count"><a href="./start?workflow=count">count</a>`)
	d.get("/runs?workflow=orders.place").contains(t, `<a id="start-link" class="button" href="./start?workflow=orders.place">Start a run</a>`)

	res := d.get("/start?workflow=orders.place").want(t, http.StatusOK)
	res.contains(t,
		`<form id="start-form" method="post" action="./start?workflow=orders.place" class="form">`,
		`<input id="field-customer" name="in.customer" value="" autocomplete="off" spellcheck="false">`,
		`<input id="field-total" name="in.total" value="" type="number" step="any" inputmode="decimal">`,
		`<input id="field-items" name="in.items" value="" type="number" step="1" inputmode="numeric" min="-2147483648" max="2147483647">`,
		`<input id="field-rush" name="in.rush" value="true" type="checkbox">`,
		`<textarea id="field-tags" name="in.tags" rows="4" spellcheck="false" class="mono"></textarea>`,
		`<input id="field-due" name="in.due" value="" placeholder="2026-11-28T10:00:00Z"`,
		`<select id="field-gift" name="in.gift"><option value="">none</option><option value="true">true</option><option value="false">false</option></select>`,
		`<input id="field-run-id" name="id" value=""`,
		`JSON: an array of strings or null.`,
	)
	// A property's fields follow the schema's order (here, by name).
	if i, j := strings.Index(res.body, `data-field="customer"`), strings.Index(res.body, `data-field="total"`); i < 0 || j < i {
		t.Errorf("the fields are not in the schema's order")
	}

	// A hand-written schema's required and enum make a required select.
	d.get("/start?workflow=manual").want(t, http.StatusOK).contains(t,
		`<label for="field-region">region <span class="required">required</span></label>`,
		`<select id="field-region" name="in.region" required><option value="">choose…</option><option value="&#34;eu&#34;">eu</option><option value="&#34;us&#34;">us</option></select>`,
		`Where it ships from.`)
	// A scalar input is one field, required.
	d.get("/start?workflow=count").want(t, http.StatusOK).contains(t,
		`<input id="field-input" name="input" value="" type="number" step="1" inputmode="numeric" required>`)

	// A recursive input: its properties through $defs, the recursion as
	// JSON; a good one starts.
	d.get("/start?workflow=tree").want(t, http.StatusOK).contains(t, `<input id="field-name" name="in.name"`,
		`<textarea id="field-kids" name="in.kids"`)
	res = d.postStart("tree", url.Values{"in.name": {"root"}, "in.kids": {`[{"name": "leaf", "kids": null}]`}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a good tree: %d\n%s", res.StatusCode, res.body)
	}
	res = d.postStart("tree", url.Values{"in.name": {"root"}, "in.kids": {`[{"name": 3}]`}}).want(t, http.StatusUnprocessableEntity)
	if e := fieldError(res.body, "field-kids"); e != "At [0].name: want string, got number 3." {
		t.Errorf("a bad tree: %q next to kids", e)
	}

	d.get("/start?workflow=nothing").want(t, http.StatusNotFound).contains(t, `No engine sharing this store serves a workflow &#34;nothing&#34;`)
}

// A value the schema refuses is refused next to its field, the form
// showing every value as given, and no run starts; a good form starts
// the run and leads to its page.
func TestStartFormChecksOnTheServer(t *testing.T) {
	t.Parallel()
	d := startForm(t)
	bad := url.Values{"in.customer": {"C-7"}, "in.total": {"99.5"}, "in.items": {"1.5"}, "in.rush": {"true"},
		"in.tags": {`["gift", 2]`}, "in.note": {"leave at the door"}, "id": {"order-1"}}
	res := d.postStart("orders.place", bad).want(t, http.StatusUnprocessableEntity)
	if e := fieldError(res.body, "field-items"); e != "Want integer, got number 1.5." {
		t.Errorf("the items field's error reads %q", e)
	}
	if e := fieldError(res.body, "field-tags"); e != "At [1]: want string, got number 2." {
		t.Errorf("the tags field's error reads %q", e)
	}
	if e := fieldError(res.body, "field-customer"); e != "" {
		t.Errorf("the customer field has an error: %q", e)
	}
	res.contains(t, `name="in.customer" value="C-7"`, `name="in.total" value="99.5"`, `name="in.items" value="1.5"`,
		`name="in.rush" value="true" type="checkbox" checked`, `>[&#34;gift&#34;, 2]</textarea>`, `name="in.note" value="leave at the door"`,
		`name="id" value="order-1"`, `aria-invalid="true" aria-describedby="field-items-error"`)
	if _, err := d.e.Get(context.Background(), "order-1"); err == nil {
		t.Fatal("a refused form started the run")
	}

	// A number that is not one, and JSON that is not JSON, are refused
	// before the schema is asked.
	res = d.postStart("orders.place", url.Values{"in.total": {"lots"}, "in.tags": {"[gift"}}).want(t, http.StatusUnprocessableEntity)
	if e := fieldError(res.body, "field-total"); e != `"lots" is not a number.` {
		t.Errorf("the total field's error reads %q", e)
	}
	if e := fieldError(res.body, "field-tags"); !strings.HasPrefix(e, "Not JSON: ") {
		t.Errorf("the tags field's error reads %q", e)
	}

	good := url.Values{"in.customer": {"C-7"}, "in.total": {"99.5"}, "in.items": {"3"}, "in.rush": {"true"},
		"in.tags": {`["gift"]`}, "in.due": {"2026-11-28T10:00:00Z"}, "in.gift": {"false"}, "id": {"order-1"}}
	res = d.postStart("orders.place", good)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "./runs/order-1?flash=") {
		t.Fatalf("a good form: %d to %q\n%s", res.StatusCode, loc, res.body)
	}
	if kind, msg := flashOf(d.follow("/start", res).body); kind != "ok" || msg != "Started a run of orders.place." {
		t.Errorf("the run's page says %s %q", kind, msg)
	}
	info, err := d.e.Get(context.Background(), "order-1")
	must(t, err)
	var in orderInput
	must(t, json.Unmarshal(info.Input, &in))
	due := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	if want := (orderInput{Customer: "C-7", Total: 99.5, Items: 3, Rush: true, Tags: []string{"gift"}, Due: &due, Gift: new(false)}); !reflect.DeepEqual(in, want) {
		t.Errorf("the run's input is %s", info.Input)
	}
	if info.Workflow != "orders.place" || info.Version != 2 {
		t.Errorf("the run is of %s v%d", info.Workflow, info.Version)
	}

	// The ID is taken now; one that is not an ID is refused in words.
	res = d.postStart("orders.place", url.Values{"id": {"order-1"}}).want(t, http.StatusUnprocessableEntity)
	if e := fieldError(res.body, "field-run-id"); !strings.Contains(e, "A run with the ID order-1 exists already") {
		t.Errorf("the ID's error reads %q", e)
	}
	res = d.postStart("orders.place", url.Values{"id": {"a/b"}}).want(t, http.StatusUnprocessableEntity)
	if e := fieldError(res.body, "field-run-id"); !strings.Contains(e, "run IDs may not contain '/'") {
		t.Errorf("an ID with a '/': %q next to the ID", e)
	}

	// A scalar input, and a generated ID.
	res = d.postStart("count", url.Values{"input": {""}}).want(t, http.StatusUnprocessableEntity)
	if e := fieldError(res.body, "field-input"); e != "Required." {
		t.Errorf("an empty count: %q", e)
	}
	res = d.postStart("count", url.Values{"input": {"42"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("count 42: %d\n%s", res.StatusCode, res.body)
	}
	runs, _, err := d.e.ListRuns(context.Background(), runtime.ListRunsQuery{Workflow: "count"})
	if err != nil || len(runs) != 1 || string(runs[0].Input) != "42" {
		t.Fatalf("the count runs: %v %v", runs, err)
	}

	// A hand-written schema's required and enum are checked here.
	res = d.postStart("manual", url.Values{"in.count": {"2"}}).want(t, http.StatusUnprocessableEntity)
	if e := fieldError(res.body, "field-region"); e != "Required." {
		t.Errorf("no region: %q", e)
	}
	res = d.postStart("manual", url.Values{"in.region": {`"mars"`}}).want(t, http.StatusUnprocessableEntity)
	if e := fieldError(res.body, "field-region"); e != `"mars" is not one of the choices.` {
		t.Errorf("region mars: %q", e)
	}
}

// Starting a run is an operator's action: read-only access sees no start
// form, and a POST without the form's token starts nothing.
func TestStartFormNeedsAnOperator(t *testing.T) {
	t.Parallel()
	d := startForm(t)
	r := httpGet("/start?workflow=count")
	r.Header.Set("X-Test-Access", "read")
	if res := d.do(r); res.StatusCode != http.StatusForbidden || !strings.Contains(res.body, "read-only") {
		t.Errorf("read-only GET start: %d\n%s", res.StatusCode, res.body)
	}
	r = httpGet("/runs")
	r.Header.Set("X-Test-Access", "read")
	d.do(r).lacks(t, `id="start-link"`, `href="./start"`, `id="bulk"`)

	cookie, _ := d.session("/start?workflow=count")
	d.post("/start?workflow=count", url.Values{"input": {"1"}, "csrf": {"forged"}}, cookie).want(t, http.StatusForbidden)
	r = postRequest("/start?workflow=count", url.Values{"input": {"1"}})
	r.Header.Set("X-Test-Access", "read")
	d.do(r).want(t, http.StatusForbidden)
	if runs, _, err := d.e.ListRuns(context.Background(), runtime.ListRunsQuery{}); err != nil || len(runs) != 0 {
		t.Fatalf("refused starts left runs: %v %v", runs, err)
	}
}
