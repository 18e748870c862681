package redisstore

import (
	"testing"

	"github.com/stemflow/stem/internal/enginetest"
	"github.com/stemflow/stem/storage"
)

// TestScenarios runs engines on the real server through every end-to-end
// scenario, each on a fresh prefix.
func TestScenarios(t *testing.T) {
	redisURL(t)
	enginetest.Run(t, func(t *testing.T) storage.Store {
		s, _ := newTestStore(t, nil)
		return s
	})
}
