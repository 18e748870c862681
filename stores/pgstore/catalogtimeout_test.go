package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// TestMigrateCatalogTimeout: a database at schema version 10, before the
// catalog kept a workflow's timeout=, is upgraded in place: its workflows
// read with no timeout, and a later put records one.
func TestMigrateCatalogTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, q := schemaAt(t, 10)
	pool := sharedPool(t)
	at := time.Now().UTC().Truncate(time.Second)
	sql := `INSERT INTO ` + q + `.workflow_types (name, version, worker, updated_at) VALUES ('report', 2, 'w1', $1)`
	if _, err := pool.Exec(ctx, sql, at); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}

	s := newTestStore(t, Options{Schema: schema})
	c, err := s.GetCatalog(ctx)
	if err != nil || len(c.Workflows) != 1 || c.Workflows[0].Name != "report" || c.Workflows[0].Version != 2 || c.Workflows[0].Timeout != 0 {
		t.Fatalf("GetCatalog after the upgrade = %+v, %v; want report, version 2, no timeout", c.Workflows, err)
	}
	if err := s.PutCatalog(ctx, storage.Catalog{Workflows: []storage.WorkflowType{{Name: "report", Version: 3, Timeout: time.Hour, Worker: "w2", UpdatedAt: at}}}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.GetCatalog(ctx); err != nil || len(c.Workflows) != 1 || c.Workflows[0].Timeout != time.Hour {
		t.Fatalf("GetCatalog after a put = %+v, %v; want report with a 1h timeout", c.Workflows, err)
	}
}
