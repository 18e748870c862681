package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/stemflow/stem/internal/enginetest"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/sqlitestore"
)

// TestScenarios runs engines through every end-to-end scenario, each on a
// fresh database file.
func TestScenarios(t *testing.T) {
	enginetest.Run(t, func(t *testing.T) storage.Store {
		s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "stem.db"), sqlitestore.Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}
