// Package errs changed the fields of declared error types in ways stored
// failures would not survive: their recorded fields would no longer decode
// into the type, or would read zero.
package errs

// LimitError was {account:string,limit:int64}: limit became a string and
// account was renamed.
//
//stem:error name=errs.limit
type LimitError struct {
	Owner string `json:"owner"`
	Limit string `json:"limit"`
}

func (e *LimitError) Error() string { return "over the limit of " + e.Owner }

// Review reuses a retired name, whose failures held {Reason:string}, with
// another shape.
//
//stem:error name=errs.review
type Review struct{ Reason int }

func (r Review) Error() string { return "held for review" }

// Same kept its shape.
//
//stem:error name=errs.same
type Same struct{ N int }

func (s Same) Error() string { return "same" }
