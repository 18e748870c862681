package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

var catalogCases = []testCase{
	{"catalog/fresh store has an empty catalog", testCatalogEmpty},
	{"catalog/put then get round-trips, sorted, schemas byte for byte", testCatalogRoundTrip},
	{"catalog/a second put replaces by name and topic and keeps the others", testCatalogReplace},
	{"catalog/queues and a workflow's queue and retention round-trip, sorted", testCatalogQueues},
	{"catalog/a later put replaces a queue by name and keeps the others", testCatalogQueuesReplace},
}

func (f *fixture) putCatalog(c storage.Catalog) {
	f.t.Helper()
	if err := f.store.PutCatalog(f.ctx, c); err != nil {
		f.t.Fatalf("PutCatalog: %v", err)
	}
}

// wantCatalog compares the stored catalog with want, times to the
// millisecond and empty schemas as nil.
func (f *fixture) wantCatalog(want storage.Catalog) {
	f.t.Helper()
	got := normCatalog(f.catalog())
	want = normCatalog(want)
	if len(got.Workflows) != len(want.Workflows) || len(got.Events) != len(want.Events) || len(got.Queues) != len(want.Queues) {
		f.t.Fatalf("catalog = %+v, want %+v", got, want)
	}
	for i, w := range want.Workflows {
		g := got.Workflows[i]
		if g.Name != w.Name || g.Version != w.Version || string(g.InputSchema) != string(w.InputSchema) ||
			string(g.OutputSchema) != string(w.OutputSchema) || g.Worker != w.Worker || !g.UpdatedAt.Equal(w.UpdatedAt) ||
			g.Queue != w.Queue || !reflect.DeepEqual(g.Retention, w.Retention) {
			f.t.Fatalf("workflow %d = %+v\n(input %s, output %s, retention %s)\nwant %+v\n(input %s, output %s, retention %s)",
				i, g, g.InputSchema, g.OutputSchema, fmtRetention(g.Retention), w, w.InputSchema, w.OutputSchema, fmtRetention(w.Retention))
		}
	}
	for i, q := range want.Queues {
		if g := got.Queues[i]; g != q {
			f.t.Fatalf("queue %d = %+v, want %+v", i, g, q)
		}
	}
	for i, e := range want.Events {
		g := got.Events[i]
		if g.Topic != e.Topic || string(g.PayloadSchema) != string(e.PayloadSchema) || g.Worker != e.Worker || !g.UpdatedAt.Equal(e.UpdatedAt) {
			f.t.Fatalf("event %d = %+v (schema %s), want %+v (schema %s)", i, g, g.PayloadSchema, e, e.PayloadSchema)
		}
	}
}

func testCatalogEmpty(f *fixture) {
	c := f.catalog()
	if len(c.Workflows) != 0 || len(c.Events) != 0 || len(c.Queues) != 0 {
		f.t.Fatalf("catalog of a fresh store = %+v, want empty", c)
	}
	// An empty put changes nothing.
	f.putCatalog(storage.Catalog{})
	if c := f.catalog(); len(c.Workflows) != 0 || len(c.Events) != 0 || len(c.Queues) != 0 {
		f.t.Fatalf("catalog after an empty put = %+v, want empty", c)
	}
}

// Schemas with their own spacing and key order: the store keeps the bytes,
// not a normalised form.
var (
	orderSchema = json.RawMessage(`{"type":"object",  "required":["id"], "properties":{"id":{"type":"string"},"amount":{"type":"number"}}}`)
	quoteSchema = json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\"price\": {\"type\": \"integer\"}}\n}")
	stringOnly  = json.RawMessage(`{"type":"string"}`)
)

func testCatalogRoundTrip(f *fixture) {
	// UpdatedAt is stored as given, not read from the store's clock.
	t1 := Start.Add(-time.Hour).Add(123 * time.Millisecond)
	in := storage.Catalog{
		Workflows: []storage.WorkflowType{
			{Name: "orders.fulfil", Version: 2, InputSchema: clone(orderSchema), OutputSchema: clone(stringOnly), Worker: "host-1/42", UpdatedAt: t1},
			{Name: "billing.charge", Version: 1, InputSchema: clone(stringOnly), Worker: "host-1/42", UpdatedAt: t1},
		},
		Events: []storage.EventType{
			{Topic: "shipment.ready", PayloadSchema: clone(quoteSchema), Worker: "host-1/42", UpdatedAt: t1},
			{Topic: "approval", Worker: "host-1/42", UpdatedAt: t1},
		},
	}
	want := storage.Catalog{
		Workflows: []storage.WorkflowType{
			{Name: "billing.charge", Version: 1, InputSchema: stringOnly, Worker: "host-1/42", UpdatedAt: t1},
			{Name: "orders.fulfil", Version: 2, InputSchema: orderSchema, OutputSchema: stringOnly, Worker: "host-1/42", UpdatedAt: t1},
		},
		Events: []storage.EventType{
			{Topic: "approval", Worker: "host-1/42", UpdatedAt: t1},
			{Topic: "shipment.ready", PayloadSchema: quoteSchema, Worker: "host-1/42", UpdatedAt: t1},
		},
	}
	f.putCatalog(in)
	// The caller may reuse its buffers.
	copy(in.Workflows[0].InputSchema, `{"XXXX"`)
	copy(in.Events[0].PayloadSchema, `{"XXXX"`)
	f.wantCatalog(want)
	// A returned catalog is the caller's to change.
	got := f.catalog()
	copy(got.Workflows[1].InputSchema, `{"XXXX"`)
	f.wantCatalog(want)

	// Many more, put in no order, come back sorted.
	var more storage.Catalog
	for _, i := range []int{7, 2, 11, 0, 5, 9, 3, 10, 1, 8, 4, 6} {
		more.Workflows = append(more.Workflows, storage.WorkflowType{Name: fmt.Sprintf("m.%02d", i), Version: 1, UpdatedAt: t1})
		more.Events = append(more.Events, storage.EventType{Topic: fmt.Sprintf("m.%02d", i), UpdatedAt: t1})
	}
	f.putCatalog(more)
	got = f.catalog()
	var names, topics []string
	for _, w := range got.Workflows {
		names = append(names, w.Name)
	}
	for _, e := range got.Events {
		topics = append(topics, e.Topic)
	}
	if len(names) != 14 || !slices.IsSorted(names) || len(topics) != 14 || !slices.IsSorted(topics) {
		f.t.Fatalf("catalog names %v, topics %v: want 14 of each, sorted", names, topics)
	}
}

func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage{}, b...)
}

func testCatalogReplace(f *fixture) {
	t1 := Start.Add(-time.Hour)
	t2 := Start.Add(time.Minute)
	f.putCatalog(storage.Catalog{
		Workflows: []storage.WorkflowType{
			{Name: "a.one", Version: 1, InputSchema: clone(stringOnly), Worker: "w1", UpdatedAt: t1},
			{Name: "b.two", Version: 1, OutputSchema: clone(stringOnly), Worker: "w1", UpdatedAt: t1},
		},
		Events: []storage.EventType{
			{Topic: "t.one", PayloadSchema: clone(stringOnly), Worker: "w1", UpdatedAt: t1},
			{Topic: "t.two", Worker: "w1", UpdatedAt: t1},
		},
	})
	f.clock.Advance(time.Minute)
	f.putCatalog(storage.Catalog{
		Workflows: []storage.WorkflowType{
			{Name: "a.one", Version: 2, OutputSchema: clone(orderSchema), Worker: "w2", UpdatedAt: t2},
			{Name: "c.three", Version: 1, Worker: "w2", UpdatedAt: t2},
		},
		Events: []storage.EventType{
			{Topic: "t.one", Worker: "w2", UpdatedAt: t2},
		},
	})
	f.wantCatalog(storage.Catalog{
		Workflows: []storage.WorkflowType{
			// Replaced whole: the old input schema is gone.
			{Name: "a.one", Version: 2, OutputSchema: orderSchema, Worker: "w2", UpdatedAt: t2},
			{Name: "b.two", Version: 1, OutputSchema: stringOnly, Worker: "w1", UpdatedAt: t1},
			{Name: "c.three", Version: 1, Worker: "w2", UpdatedAt: t2},
		},
		Events: []storage.EventType{
			{Topic: "t.one", Worker: "w2", UpdatedAt: t2},
			{Topic: "t.two", Worker: "w1", UpdatedAt: t1},
		},
	})
}

func fmtRetention(d *time.Duration) string {
	if d == nil {
		return "nil"
	}
	return d.String()
}

func durationPtr(d time.Duration) *time.Duration { return &d }

func testCatalogQueues(f *fixture) {
	t1 := Start.Add(-time.Hour).Add(7 * time.Millisecond)
	week := durationPtr(7 * 24 * time.Hour)
	in := storage.Catalog{
		Workflows: []storage.WorkflowType{
			{Name: "mail.send", Version: 1, Queue: "emails", Retention: week, Worker: "host-1/42", UpdatedAt: t1},
			{Name: "audit.keep", Version: 1, Queue: "bulk", Retention: durationPtr(0), Worker: "host-1/42", UpdatedAt: t1},
			{Name: "plain", Version: 3, Worker: "host-1/42", UpdatedAt: t1},
		},
		Queues: []storage.QueueType{
			{Queue: storage.Queue{Name: "emails", Concurrency: 5, PartitionConcurrency: 1, Rate: 100, RatePeriod: time.Minute}, Worker: "host-1/42", UpdatedAt: t1},
			{Queue: storage.Queue{Name: "bulk"}, Worker: "host-1/42", UpdatedAt: t1},
			{Queue: storage.Queue{Name: storage.DefaultQueue, Concurrency: 50}, Worker: "host-1/42", UpdatedAt: t1},
			{Queue: storage.Queue{Name: "api", Rate: 3, RatePeriod: 1500 * time.Millisecond}, Worker: "host-1/42", UpdatedAt: t1},
		},
	}
	want := storage.Catalog{
		Workflows: []storage.WorkflowType{
			{Name: "audit.keep", Version: 1, Queue: "bulk", Retention: durationPtr(0), Worker: "host-1/42", UpdatedAt: t1},
			{Name: "mail.send", Version: 1, Queue: "emails", Retention: durationPtr(7 * 24 * time.Hour), Worker: "host-1/42", UpdatedAt: t1},
			{Name: "plain", Version: 3, Worker: "host-1/42", UpdatedAt: t1},
		},
		Queues: []storage.QueueType{
			{Queue: storage.Queue{Name: "api", Rate: 3, RatePeriod: 1500 * time.Millisecond}, Worker: "host-1/42", UpdatedAt: t1},
			{Queue: storage.Queue{Name: "bulk"}, Worker: "host-1/42", UpdatedAt: t1},
			{Queue: storage.Queue{Name: storage.DefaultQueue, Concurrency: 50}, Worker: "host-1/42", UpdatedAt: t1},
			{Queue: storage.Queue{Name: "emails", Concurrency: 5, PartitionConcurrency: 1, Rate: 100, RatePeriod: time.Minute}, Worker: "host-1/42", UpdatedAt: t1},
		},
	}
	f.putCatalog(in)
	*week = time.Hour // the caller may reuse what it put
	f.wantCatalog(want)
	got := f.catalog()
	*got.Workflows[1].Retention = time.Hour // what it got is its own
	f.wantCatalog(want)
}

func testCatalogQueuesReplace(f *fixture) {
	t1 := Start.Add(-time.Hour)
	t2 := Start.Add(time.Minute)
	f.putCatalog(storage.Catalog{
		Workflows: []storage.WorkflowType{{Name: "mail.send", Version: 1, Queue: "emails", Retention: durationPtr(time.Hour), Worker: "w1", UpdatedAt: t1}},
		Queues: []storage.QueueType{
			{Queue: storage.Queue{Name: "emails", Concurrency: 5, Rate: 10, RatePeriod: time.Second}, Worker: "w1", UpdatedAt: t1},
			{Queue: storage.Queue{Name: "bulk", Concurrency: 2}, Worker: "w1", UpdatedAt: t1},
		},
	})
	f.clock.Advance(time.Minute)
	f.putCatalog(storage.Catalog{
		Workflows: []storage.WorkflowType{{Name: "mail.send", Version: 2, Worker: "w2", UpdatedAt: t2}},
		Queues:    []storage.QueueType{{Queue: storage.Queue{Name: "emails", PartitionConcurrency: 1}, Worker: "w2", UpdatedAt: t2}},
	})
	f.wantCatalog(storage.Catalog{
		// Replaced whole: the old queue, retention and limits are gone.
		Workflows: []storage.WorkflowType{{Name: "mail.send", Version: 2, Worker: "w2", UpdatedAt: t2}},
		Queues: []storage.QueueType{
			{Queue: storage.Queue{Name: "bulk", Concurrency: 2}, Worker: "w1", UpdatedAt: t1},
			{Queue: storage.Queue{Name: "emails", PartitionConcurrency: 1}, Worker: "w2", UpdatedAt: t2},
		},
	})
}
