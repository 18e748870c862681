// Package uuid is a stand-in for github.com/google/uuid with the names the
// analyzer's test packages use: the analyzer knows it by its import path.
package uuid

// UUID is a UUID.
type UUID [16]byte

// New returns a random UUID.
func New() UUID { return UUID{} }

// NewString returns a random UUID as text.
func NewString() string { return "" }

// NewRandom returns a random UUID.
func NewRandom() (UUID, error) { return UUID{}, nil }

// NewV7 returns a time-ordered UUID.
func NewV7() (UUID, error) { return UUID{}, nil }

// Parse parses a UUID: deterministic.
func Parse(s string) (UUID, error) { return UUID{}, nil }

// String formats the UUID: deterministic.
func (u UUID) String() string { return "" }
