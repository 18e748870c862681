package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/stores/storetest"
)

// TestConformance runs the conformance suite, each case on a fresh database
// file.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) runtime.Store {
		s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "stem.db"), sqlitestore.Options{Now: now})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}
