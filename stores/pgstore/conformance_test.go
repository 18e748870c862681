package pgstore

import (
	"testing"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storetest"
)

// TestConformance runs the store conformance suite against a real server,
// each case on its own freshly created schema with the suite's clock as the
// store's clock.
func TestConformance(t *testing.T) {
	testURL(t)
	storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
		return newTestStore(t, Options{Clock: clock})
	})
}
