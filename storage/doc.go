// Package storage is the contract between the Stem runtime and the stores
// that keep its state: the Store interface, the records and requests its
// methods take and return, the sentinel errors stores report, the codes
// that carry an error's identity through storage, and the rules every store
// shares (request validation, page sizes, the notification hub, the clock,
// the name rules, a server's health).
//
// Two optional interfaces make engines faster, never more correct: a
// Notifier tells workers that runs may be ready to claim, and a
// FinishNotifier tells every process that runs ended, so a caller awaiting
// a result hears of it at once. Without them engines poll; Store.NextWake
// tells an idle engine how long it may sleep. A third serves measurement:
// a CommitProber measures the ceiling of the server (or file) under the
// store, the cheapest durable commit, so that a benchmark states the
// store's figures next to it.
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
