package p

import "github.com/stemflow/stem/runtime"

type Steps struct{}

//stem:workflow name=p.fulfil
func Fulfil(ctx *FulfilContext, n int) (int, error) { return n, nil }

// Ok is a reply.
type Ok struct{}

//stem:update name=p.approve reply=Ok
type Approval struct{ X int }

// OnApproval has the name of the method returning a future of Approval.
//
//stem:step name=on-approval
func (s *Steps) OnApproval(ctx runtime.StepContext) error { return nil }

// AwaitApproval is the user's own method on a generated context.
func (c *FulfilContext) AwaitApproval() {}

// ApprovalUpdate is the user's own.
const ApprovalUpdate = 1

//stem:stream name=p.log
type Line struct{ T string }

// AppendLine has the name of the method appending to stream Line.
//
//stem:step name=append-line
func (s *Steps) AppendLine(ctx runtime.StepContext) error { return nil }

// StreamLine is the user's own.
func StreamLine() {}

// CloseLineStream is the user's own method on the generated calls.
func (c *stemCalls) CloseLineStream() {}

// ApprovalOrStartFulfil's client function has the name of Approval's
// update-with-start of Fulfil.
//
//stem:update name=p.approve-or-start reply=Ok
type ApprovalOrStartFulfil struct{ X int }

// stemRegisterUpdates is the user's own.
func stemRegisterUpdates() {}
