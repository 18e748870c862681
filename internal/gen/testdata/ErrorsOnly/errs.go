// Package errs only declares errors, shared by the workflows of other
// packages.
package errs

import "errors"

// ErrGone: the thing is gone.
//
//stem:error name=errs.gone
var ErrGone = errors.New("gone")
