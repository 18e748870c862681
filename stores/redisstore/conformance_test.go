package redisstore

import (
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/storetest"
)

// TestConformance runs the shared Store suite against the real server, each
// case on a fresh prefix whose keys are deleted afterwards.
func TestConformance(t *testing.T) {
	redisURL(t)
	storetest.Run(t, func(t *testing.T, now func() time.Time) runtime.Store {
		s, _ := newTestStore(t, now)
		return s
	})
}
