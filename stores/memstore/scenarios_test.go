package memstore_test

import (
	"testing"

	"github.com/stemflow/stem/internal/enginetest"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/memstore"
)

// TestScenarios runs engines on memstore through every end-to-end scenario.
func TestScenarios(t *testing.T) {
	enginetest.Run(t, func(t *testing.T) storage.Store { return memstore.New(memstore.Options{}) })
}
