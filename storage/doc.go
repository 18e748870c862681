// Package storage is the contract between the Stem runtime and the stores
// that keep its state: the Store interface, the records and requests its
// methods take and return, the sentinel errors stores report, the codes
// that carry an error's identity through storage, and the rules every store
// shares (request validation, page sizes, the notification hub, the clock).
//
// Workflow authors do not need this package: they use package runtime, which
// re-exports the sentinels they test with errors.Is. Store authors implement
// Store, call the shared rules here instead of restating them, and run the
// conformance suite in stores/storetest unchanged:
//
//	var _ storage.Store = (*Store)(nil)
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock storage.Clock) storage.Store {
//			return memstore.New(memstore.Options{Clock: clock})
//		})
//	}
package storage
