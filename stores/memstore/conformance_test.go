package memstore_test

import (
	"testing"

	"github.com/stemflow/stem/storage"

	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/stores/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
		return memstore.New(memstore.Options{Clock: clock})
	})
}
