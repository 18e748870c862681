// Package errs moved declared error names between a value and a type:
// failures stored under errs.gone hold no fields, and those stored under
// errs.limit hold the old type's fields.
package errs

import "errors"

// Gone was declared as a value, errors.New("gone").
//
//stem:error name=errs.gone
type Gone struct{ What string }

func (g *Gone) Error() string { return g.What + " is gone" }

// ErrLimit was the type {account:string}.
//
//stem:error name=errs.limit
var ErrLimit = errors.New("over the limit")

// ErrKept stays a value.
//
//stem:error name=errs.kept
var ErrKept = errors.New("kept")
