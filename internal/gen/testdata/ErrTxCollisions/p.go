package p

import (
	"database/sql"

	"github.com/stemflow/stem/runtime"
)

type Steps struct{}

//stem:workflow name=p.fulfil
func Fulfil(ctx *FulfilContext, n int) (int, error) { return n, nil }

//stem:event topic=ready
type Ready struct{ X int }

// StartFulfilTx is the user's own.
func StartFulfilTx() {}

// SendReadyOrStartFulfil is the user's own.
var SendReadyOrStartFulfil int

// EmitReadyTx is the user's own.
type EmitReadyTx struct{}

//stem:step name=ledger tx
func (s *Steps) Ledger(ctx runtime.StepContext, tx *sql.Tx) error { return nil }

// stemTxSteps is the user's own.
var stemTxSteps int

// LedgerAsync is a step of its own: a transactional step has no future
// form, so it takes no name from it.
//
//stem:step name=ledger-async
func (s *Steps) LedgerAsync(ctx runtime.StepContext) error { return nil }
