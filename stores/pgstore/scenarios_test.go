package pgstore

import (
	"testing"

	"github.com/stemflow/stem/internal/enginetest"
	"github.com/stemflow/stem/storage"
)

// TestScenarios runs engines on a real server through every end-to-end
// scenario, each on its own freshly created schema.
func TestScenarios(t *testing.T) {
	testURL(t)
	enginetest.Run(t, func(t *testing.T) storage.Store { return newTestStore(t, Options{}) })
}
