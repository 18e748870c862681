// Package errs declares errors, and its manifest was written before
// manifests recorded them (format 3): the next generation records them.
package errs

import "errors"

// ErrGone: the thing is gone.
//
//stem:error name=errs.gone
var ErrGone = errors.New("gone")

// LimitError says which limit was passed.
//
//stem:error name=errs.limit
type LimitError struct {
	Account string `json:"account"`
	Limit   int64  `json:"limit"`
	// Cause is not recorded.
	Cause error `json:"-"`
}

func (e *LimitError) Error() string { return "over the limit of " + e.Account }
