package pgstore

import (
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/storetest"
)

// TestConformance runs the store conformance suite against a real server,
// each case on its own freshly created schema with the suite's clock as the
// store's clock.
func TestConformance(t *testing.T) {
	testURL(t)
	storetest.Run(t, func(t *testing.T, now func() time.Time) runtime.Store {
		return newTestStore(t, Options{Now: now})
	})
}
