package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/stores/sqlitestore"
	"github.com/stemflow/stem/stores/storetest"
)

// TestConformance runs the conformance suite, each case on a fresh database
// file.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
		s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "stem.db"), sqlitestore.Options{Clock: clock})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}
