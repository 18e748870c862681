// Package errs changed its declared errors since the manifest was written,
// in ways every stored failure survives: LimitError gained a field and
// widened one, errs.gone stays a value, errs.closed is no longer declared
// (kept, retired) and errs.review is new.
package errs

import "errors"

// ErrGone: the thing is gone.
//
//stem:error name=errs.gone
var ErrGone = errors.New("gone")

// LimitError was {account:string,limit:int32}.
//
//stem:error name=errs.limit
type LimitError struct {
	Account string `json:"account"`
	Limit   int64  `json:"limit"`
	Note    string `json:"note"`
}

func (e *LimitError) Error() string { return "over the limit of " + e.Account }

// Review is new, with a value receiver.
//
//stem:error name=errs.review
type Review struct{ Reason string }

func (r Review) Error() string { return "held for review: " + r.Reason }
