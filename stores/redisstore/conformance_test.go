package redisstore

import (
	"testing"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/stores/storetest"
)

// TestConformance runs the shared Store suite against the real server, each
// case on a fresh prefix whose keys are deleted afterwards.
func TestConformance(t *testing.T) {
	redisURL(t)
	storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
		s, _ := newTestStore(t, clock)
		return s
	})
}
