// Package bank declares its errors once, under durable names, so that a
// transfer's caller matches them with errors.Is and errors.As.
package bank

import (
	"errors"
	"fmt"

	"github.com/stemflow/stem/runtime"
)

// ErrInsufficientFunds: the account cannot cover the amount.
//
//stem:error name=bank.insufficient_funds
var ErrInsufficientFunds = errors.New("insufficient funds")

// Code is an error kind written as a constant.
type Code string

func (c Code) Error() string { return string(c) }

// ErrFrozen: the account is frozen.
//
//stem:error name=bank.frozen
const ErrFrozen Code = "account frozen"

// LimitError says which limit a transfer passed.
//
//stem:error name=bank.limit
type LimitError struct {
	Account string `json:"account"`
	Limit   int    `json:"limit"`
	// Cause is not recorded; Unwrap gives the sentinel instead.
	Cause error `json:"-"`
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("account %s is over its limit of %d", e.Account, e.Limit)
}

// Unwrap returns ErrInsufficientFunds.
func (e *LimitError) Unwrap() error { return ErrInsufficientFunds }

// Review is an error type with a value receiver.
//
//stem:error name=bank.review
type Review struct{ Reason string }

func (r Review) Error() string { return "held for review: " + r.Reason }

// Transfer fails with a declared error chosen by its input.
//
//stem:workflow name=bank.transfer
func Transfer(ctx *TransferContext, kind string) (string, error) {
	if err := ctx.Debit(kind); err != nil {
		return "", fmt.Errorf("transfer: %w", err)
	}
	return "ok", nil
}

// Debit fails as kind says.
//
//stem:step name=debit
func Debit(ctx runtime.StepContext, kind string) error {
	switch kind {
	case "limit":
		return &LimitError{Account: "A-1", Limit: 100}
	case "frozen":
		return runtime.Permanent(ErrFrozen)
	case "review":
		return Review{Reason: "fraud"}
	}
	return nil
}
