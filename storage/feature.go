package storage

// Feature is a part of the contract that a store may lack in some
// configuration, where honouring it would need one atomic change, or one
// order, across what the store keeps apart (a Redis Cluster store that
// spreads runs over several shards, say). What a store that lacks a
// feature does instead is the feature's to say.
type Feature string

// The features a store may lack.
const (
	// FeatureStartKeys is NewRun.Key: a workflow's key held by at most one
	// run at a time, whichever run ID takes it. A store that lacks it
	// refuses a create (or a schedule's write) with a key, with
	// ErrUnsupported and nothing written.
	FeatureStartKeys Feature = "start keys"
	// FeatureQueueLimits is a queue's Concurrency, PartitionConcurrency
	// and Rate, bounded across all of the queue's runs. A store that lacks
	// it refuses a claim that names a limited queue, and a catalog that
	// holds one, with ErrUnsupported and nothing leased or written.
	FeatureQueueLimits Feature = "queue limits"
	// FeatureGlobalOrder is one order across the whole store: a claim
	// takes the highest priority first and, within a priority, the
	// oldest ready first (a recovery first), and a purge batch the oldest
	// ended first. A store that lacks it keeps those orders within each
	// part of the store and visits the parts in turn: every ready run is
	// still claimed, and every purgeable run purged, by enough calls.
	FeatureGlobalOrder Feature = "one order across the store"
)

// Partial is implemented by a store that lacks some features as it is
// configured. A store that does not implement it has every feature.
type Partial interface {
	// Lacks reports whether the store lacks f.
	Lacks(f Feature) bool
	// WhyLacks says, for a message, why the store lacks f as configured
	// and how to configure it to have f; "" when it has f.
	WhyLacks(f Feature) string
}

// Has reports whether s has f: it implements no Partial, or its Partial
// does not lack f.
func Has(s Store, f Feature) bool {
	p, ok := s.(Partial)
	return !ok || !p.Lacks(f)
}
