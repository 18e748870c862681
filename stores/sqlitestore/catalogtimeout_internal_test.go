package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// A database written by schema version 9, before the catalog kept a
// workflow's timeout=, is upgraded in place: its workflows read with no
// timeout, and a later put records one.
func TestMigrateCatalogTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openAtVersion(t, filepath.Join(t.TempDir(), "stem.db"), 9)
	defer s.Close()
	n := time.Now().UnixNano()
	migrateSeeded(t, ctx, s, []seedRow{
		{`INSERT INTO workflow_types (name, version, worker, updated_at, queue, retention) VALUES ('report', 2, 'w1', ?1, '', NULL)`, []any{n}},
	})
	c, err := s.GetCatalog(ctx)
	if err != nil || len(c.Workflows) != 1 || c.Workflows[0].Name != "report" || c.Workflows[0].Version != 2 || c.Workflows[0].Timeout != 0 {
		t.Fatalf("GetCatalog after the upgrade = %+v, %v; want report, version 2, no timeout", c.Workflows, err)
	}
	if err := s.PutCatalog(ctx, storage.Catalog{Workflows: []storage.WorkflowType{{Name: "report", Version: 3, Timeout: time.Hour, Worker: "w2", UpdatedAt: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.GetCatalog(ctx); err != nil || len(c.Workflows) != 1 || c.Workflows[0].Timeout != time.Hour {
		t.Fatalf("GetCatalog after a put = %+v, %v; want report with a 1h timeout", c.Workflows, err)
	}
}
