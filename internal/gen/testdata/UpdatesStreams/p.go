// Package p takes updates and writes a stream: a run of Order waits for a
// manager's approval, which a caller sends as an update and the run
// replies to, and tells its readers how it goes on its log stream, from
// the workflow and from a step.
package p

import (
	"errors"
	"fmt"
	"time"

	"github.com/stemflow/stem/runtime"
)

// Approval is a manager's decision on an order.
//
//stem:update name=p.approve reply=Decision validate=checkApproval
type Approval struct {
	By    string `json:"by"`
	Limit int64  `json:"limit"`
}

// Decision is what a run of Order answers an approval with.
type Decision struct {
	Accepted bool  `json:"accepted"`
	Total    int64 `json:"total"`
}

// ErrNoApprover: an approval that does not say who approves.
var ErrNoApprover = errors.New("an approval needs who approves")

// checkApproval refuses an approval that does not say who approves,
// before it reaches the run.
func checkApproval(a Approval) error {
	if a.By == "" {
		return ErrNoApprover
	}
	return nil
}

// Note is a remark for a run, which it acknowledges.
//
// Deprecated: send an Approval.
//
//stem:update name=p.note reply=Ack version=2
type Note struct {
	Text string `json:"text"`
}

// Ack counts the notes a run has seen.
type Ack struct {
	Seen int `json:"seen"`
}

// Line is one line of an order's log.
//
//stem:stream name=p.log
type Line struct {
	Text string `json:"text"`
}

// Steps holds the steps.
type Steps struct{}

// Pack packs n items, logging as it goes.
//
//stem:step name=pack
func (s *Steps) Pack(ctx runtime.StepContext, n int) (int, error) {
	for i := range n {
		if err := AppendLineInStep(ctx, Line{Text: fmt.Sprintf("packed %d", i+1)}); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Order waits up to an hour for an approval of its total, packs, takes a
// note, and logs every stage.
//
//stem:workflow name=p.order
func Order(ctx *OrderContext, total int64) (int64, error) {
	if err := ctx.AppendLine(Line{Text: "waiting for approval"}); err != nil {
		return 0, err
	}
	approval, late := ctx.OnApproval("approval"), ctx.Timer("approval-timeout", time.Hour)
	first, err := ctx.Select("approval-or-timeout", approval, late)
	if err != nil {
		return 0, err
	}
	if first == 1 {
		return 0, errors.New("not approved in time")
	}
	u, err := approval.Await()
	if err != nil {
		return 0, err
	}
	if u.Request.Limit < total {
		if err := u.Fail(ctx.WorkflowContext, fmt.Errorf("total %d is over the limit %d", total, u.Request.Limit)); err != nil {
			return 0, err
		}
		return 0, errors.New("refused")
	}
	if _, err := ctx.Pack(2); err != nil {
		return 0, err
	}
	if err := u.Reply(ctx.WorkflowContext, Decision{Accepted: true, Total: total}); err != nil {
		return 0, err
	}
	note, err := ctx.AwaitNote("note")
	if err != nil {
		return 0, err
	}
	if err := note.Reply(ctx.WorkflowContext, Ack{Seen: 1}); err != nil {
		return 0, err
	}
	if err := ctx.AppendLine(Line{Text: "done: " + note.Request.Text}); err != nil {
		return 0, err
	}
	return total, ctx.CloseLineStream()
}
