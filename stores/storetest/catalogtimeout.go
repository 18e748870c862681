package storetest

import (
	"errors"
	"time"

	"github.com/stemflow/stem/storage"
)

// catalogTimeoutCases hold the rules for a workflow's timeout= in the
// catalog (storage.WorkflowType.Timeout), which starts that know a workflow
// by name only read to give its runs their deadline.
var catalogTimeoutCases = []testCase{
	{"catalog/a workflow's timeout round-trips, and a later put replaces it", testCatalogTimeout},
	{"catalog/a negative timeout is refused, with nothing written", testCatalogTimeoutNegative},
}

func testCatalogTimeout(f *fixture) {
	t1 := Start.Add(-time.Hour)
	f.putCatalog(storage.Catalog{Workflows: []storage.WorkflowType{
		{Name: "report.build", Version: 1, Timeout: 90 * time.Minute, Worker: "w1", UpdatedAt: t1},
		{Name: "mail.send", Version: 1, Worker: "w1", UpdatedAt: t1},
		// Below a millisecond, kept to the nanosecond.
		{Name: "tick", Version: 3, Timeout: 1500 * time.Nanosecond, Worker: "w1", UpdatedAt: t1},
	}})
	f.wantTimeouts(map[string]time.Duration{"mail.send": 0, "report.build": 90 * time.Minute, "tick": 1500 * time.Nanosecond})

	// Replaced whole by name: a timeout dropped from the annotation is gone.
	f.putCatalog(storage.Catalog{Workflows: []storage.WorkflowType{
		{Name: "report.build", Version: 2, Worker: "w2", UpdatedAt: Start},
		{Name: "mail.send", Version: 1, Timeout: 24 * time.Hour, Worker: "w2", UpdatedAt: Start},
	}})
	f.wantTimeouts(map[string]time.Duration{"mail.send": 24 * time.Hour, "report.build": 0, "tick": 1500 * time.Nanosecond})
}

// wantTimeouts checks the catalog's workflows and their timeouts.
func (f *fixture) wantTimeouts(want map[string]time.Duration) {
	f.t.Helper()
	c := f.catalog()
	if len(c.Workflows) != len(want) {
		f.t.Fatalf("catalog has %d workflows (%+v), want %d", len(c.Workflows), c.Workflows, len(want))
	}
	for _, w := range c.Workflows {
		d, ok := want[w.Name]
		if !ok {
			f.t.Fatalf("catalog has workflow %q, want only %v", w.Name, want)
		}
		if w.Timeout != d {
			f.t.Errorf("workflow %q: Timeout = %v, want %v", w.Name, w.Timeout, d)
		}
	}
}

func testCatalogTimeoutNegative(f *fixture) {
	err := f.store.PutCatalog(f.ctx, storage.Catalog{Workflows: []storage.WorkflowType{
		{Name: "ok", Version: 1, Timeout: time.Minute},
		{Name: "bad", Version: 1, Timeout: -time.Second},
	}})
	if !errors.Is(err, storage.ErrInvalidArgument) {
		f.t.Fatalf("PutCatalog with a negative timeout: %v, want ErrInvalidArgument", err)
	}
	if c := f.catalog(); len(c.Workflows) != 0 {
		f.t.Fatalf("catalog after a refused put = %+v, want empty", c.Workflows)
	}
}
