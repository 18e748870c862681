// Package r is internal to q: p cannot import it.
package r

// R is exported, but only to q's tree.
type R struct{ N int }
