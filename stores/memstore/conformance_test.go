package memstore_test

import (
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) runtime.Store {
		return memstore.New(memstore.Options{Now: now})
	})
}
