// Package q declares payload types for package p: some it can name, some
// it cannot.
package q

import "example.com/stemcase/q/internal/r"

// Exported has only exported fields, of exported types: p guards it.
type Exported struct {
	A int
	B []Inner `json:"b"`
}

// Inner is inside Exported.
type Inner struct{ C string }

// Mixed has an unexported field, which p cannot name: no guard.
type Mixed struct {
	A int
	b int
}

// Wrap has an exported field of an unexported type: no guard for either.
type Wrap struct{ H hidden }

type hidden struct{ X int }

// Use keeps Mixed.b used.
func (m Mixed) Use() int { return m.b }

// Deep has a field of a type internal to q's tree, which p cannot import:
// no guard for either.
type Deep struct{ R r.R }
