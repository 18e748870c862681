package redisstore

import (
	"context"
	"slices"
	"testing"

	"github.com/stemflow/stem/storage"
)

// TestCatalogAttributes: a workflow's declared attributes are kept in
// order, and a workflow without any reads none.
func TestCatalogAttributes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newTestStore(t, newClock())
	decls := []storage.AttrDecl{{Name: "total", Type: storage.AttrNumber, From: "Order.Total"}, {Name: "cust", Type: storage.AttrString}}
	if err := s.PutCatalog(ctx, storage.Catalog{Workflows: []storage.WorkflowType{
		{Name: "a", Attributes: decls}, {Name: "b", Attributes: []storage.AttrDecl{}}}}); err != nil {
		t.Fatal(err)
	}
	c, err := s.GetCatalog(ctx)
	if err != nil || len(c.Workflows) != 2 {
		t.Fatalf("GetCatalog = %+v, %v", c, err)
	}
	if !slices.Equal(c.Workflows[0].Attributes, decls) || c.Workflows[1].Attributes != nil {
		t.Fatalf("attributes read back %+v and %+v", c.Workflows[0].Attributes, c.Workflows[1].Attributes)
	}
}
