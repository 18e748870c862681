// Package docs has workflows that do a bit of everything a workflow can,
// for the page stemgen writes beside them.
package docs

import (
	"errors"
	"fmt"
	"time"

	rt "github.com/stemflow/stem/runtime"
)

// Order is what to ship.
type Order struct {
	ID    string
	Lines []string
	Mode  string
	Due   time.Time
	Again int
}

// Quote is what shipping costs.
type Quote struct{ Cents int64 }

// Bill is what the customer pays.
type Bill struct{ Cents int64 }

// ShipProgress is what a run of Ship publishes.
type ShipProgress struct{ Stage string }

// Shipped says an order left the warehouse; cmd/ship sends it.
//
//stem:event topic=docs/shipped:v1
type Shipped struct{ Tracking string }

// Cancelled says the customer cancelled; step Cancel emits it.
//
//stem:event topic=docs.cancelled
type Cancelled struct{ Reason string }

// Ship checks and quotes at once, packs every line, waits as the *mode*
// says, then for the `carrier` or a <cancel> | whichever comes first, and
// bills through a child. Callers start it with StartShip.
//
//stem:workflow name=docs.ship version=3 progress=ShipProgress
func Ship(ctx *ShipContext, in Order) (Bill, error) {
	report := func(stage string) error {
		return ctx.SetProgress(ShipProgress{Stage: stage})
	}
	if err := report("checking"); err != nil {
		return Bill{}, err
	}
	check, quote := ctx.CheckAsync(in), ctx.QuoteAsync(in)
	if err := rt.All(ctx.WorkflowContext, check, quote); err != nil {
		return Bill{}, err
	}
	q, err := quote.Await()
	if err != nil {
		return Bill{}, err
	}
	for i := 0; i < len(in.Lines); i++ {
		if in.Lines[i] == "" {
			continue
		}
		if _, err := ctx.Pack(in.Lines[i]); err != nil {
			return Bill{}, err
		}
	}
	switch in.Mode {
	case "express":
		err = ctx.Sleep(`express "window"`, time.Minute)
	case "slow", "bulk":
		err = ctx.SleepUntil(fmt.Sprintf("until-%q", in.ID), in.Due)
	default:
	}
	if err != nil {
		return Bill{}, err
	}
	if err := report("waiting"); err != nil {
		return Bill{}, err
	}
	shipped, cancelled := ctx.OnShipped("shipped"), ctx.OnCancelled("cancel<now>")
	first, err := rt.Select(ctx.WorkflowContext, "shipped|cancelled", shipped, cancelled)
	if err != nil {
		return Bill{}, err
	}
	if first == 1 {
		if err := ctx.Refund(q); err != nil {
			return Bill{}, err
		}
		return Bill{}, errors.New("cancelled")
	}
	if _, err := shipped.Await(); err != nil {
		return Bill{}, err
	}
	if _, err := rt.WaitForEvent[Shipped](ctx.WorkflowContext, "raw", "docs.raw", 0); err != nil {
		return Bill{}, err
	}
	bill, err := ctx.CallBillFor("bill", q)
	if err != nil {
		return Bill{}, err
	}
	audit, err := ctx.StartAuditChild("audit", in.ID)
	if err != nil {
		return Bill{}, err
	}
	if _, err := audit.Result(); err != nil {
		return Bill{}, err
	} else if in.Again > 0 {
		in.Again--
		return Bill{}, ctx.ContinueAsNew(in)
	}
	return bill, nil
}

// engine is what BillFor emits with: a workflow that emits outside a step
// does it again on every replay, but the page shows it all the same.
var engine *rt.Engine

// Bill charges a quote.
//
//stem:workflow name=docs.bill
func BillFor(ctx *BillForContext, q Quote) (Bill, error) {
	if q.Cents == 0 {
		if _, err := EmitCancelled(ctx.Context(), engine, Cancelled{Reason: "free"}); err != nil {
			return Bill{}, err
		}
	}
	return ctx.Charge(q)
}

// Audit waits an hour for a cancellation, and cancels when none comes.
//
// Deprecated: audits move to the ledger.
//
//stem:workflow name=docs.audit
func Audit(ctx *AuditContext, id string) (string, error) {
	if _, err := ctx.AwaitCancelled("cancelled", time.Hour); errors.Is(err, rt.ErrEventTimeout) {
		return "cancelled by audit", ctx.Cancel(id)
	} else if err != nil {
		return "", err
	}
	bills := make([]*rt.Future[Bill], 0, 2)
	for range 2 {
		bills = append(bills, ctx.CallBillForAsync("again", Quote{}))
	}
	for _, b := range bills {
		if _, err := b.Await(); err != nil {
			if rerr := ctx.Refund(Quote{}); rerr != nil {
				return "", rerr
			}
			return "", err
		}
	}
	return "cancelled by the customer", nil
}

// Steps holds what the steps need.
type Steps struct{ Engine *rt.Engine }

// Check checks an order.
//
//stem:step name=check
func (s *Steps) Check(ctx rt.StepContext, in Order) error { return nil }

// Quote quotes shipping.
//
//stem:step name=quote.shipping version=2
func (s *Steps) Quote(ctx rt.StepContext, in Order) (Quote, error) { return Quote{Cents: 100}, nil }

// Pack packs one line.
//
//stem:step name=pack autoversion
func (s *Steps) Pack(ctx rt.StepContext, line string) (string, error) { return line, nil }

// Refund refunds a quote.
//
//stem:step name=refund
func (s *Steps) Refund(ctx rt.StepContext, q Quote) error { return nil }

// Charge charges a quote.
//
//stem:step name=charge
func (s *Steps) Charge(ctx rt.StepContext, q Quote) (Bill, error) { return Bill(q), nil }

// Cancel cancels an order and tells whoever waits.
//
//stem:step name=cancel
func (s *Steps) Cancel(ctx rt.StepContext, id string) error {
	_, err := EmitCancelled(ctx, s.Engine, Cancelled{Reason: id})
	return err
}
