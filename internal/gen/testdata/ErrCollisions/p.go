package p

import "github.com/stemflow/stem/runtime"

type Steps struct{}

//stem:workflow name=p.fulfil
func Fulfil(ctx *FulfilContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.refund
func Refund(ctx *RefundContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.foobatch
func FooBatch(ctx *FooBatchContext, n int) (int, error) { return n, nil }

//stem:workflow name=p.foo
func Foo(ctx *FooContext, n int) (int, error) { return n, nil }

// RegisterFulfil is the user's own.
func RegisterFulfil() {}

//stem:step name=sleep
func (s *Steps) Sleep(ctx runtime.StepContext) error { return nil }

//stem:step name=call
func (s *Steps) CallRefund(ctx runtime.StepContext) error { return nil }

//stem:event topic=ready
type Ready struct{ X int }

// AwaitReady is the user's own method on a generated context.
func (c *FulfilContext) AwaitReady() {}

// Helper is fine.
func (c *FulfilContext) Helper() {}

// Result hides the embedded method.
func (r *FooRun) Result() {}

// stemCalls is the user's own.
var stemCalls int

//stem:step name=wc
func wc(ctx runtime.StepContext) error { return nil }

// StepValidate is the user's own.
const StepValidate = 1

//stem:step name=validate
func (s *Steps) Validate(ctx runtime.StepContext) error { return nil }

//stem:step name=pack autoversion
func (s *Steps) Pack(ctx runtime.StepContext) error { return nil }

//stem:step name=pack-iteration
func (s *Steps) PackIteration(ctx runtime.StepContext) error { return nil }

//stem:step name=start-refund
func (s *Steps) StartRefundChild(ctx runtime.StepContext) error { return nil }

// CallFoo is the user's own method on a generated context.
func (c *RefundContext) CallFoo() {}

// StartFoo is fine on a context: the top-level StartFoo starts a run, and
// the context's child call is StartFooChild.
func (c *RefundContext) StartFoo() {}

// stemRegisterEvents is the user's own.
func stemRegisterEvents() {}

//stem:step name=reserve
func (s *Steps) Reserve(ctx runtime.StepContext) error { return nil }

//stem:step name=reserve-async
func (s *Steps) ReserveAsync(ctx runtime.StepContext) error { return nil }

//stem:step name=continue
func (s *Steps) ContinueAsNew(ctx runtime.StepContext) error { return nil }

//stem:step name=on-ready
func (s *Steps) OnReady(ctx runtime.StepContext) error { return nil }

//stem:step name=timer
func (s *Steps) Timer(ctx runtime.StepContext) error { return nil }

// SetProgress is the user's own method on a generated context.
func (c *FooContext) SetProgress(n int) {}

// TrackedProgress is what Tracked publishes.
type TrackedProgress struct{ Done int }

//stem:workflow name=p.tracked progress=TrackedProgress
func Tracked(ctx *TrackedContext, n int) (int, error) { return n, nil }

// WaitProgress is the user's own method on a generated run handle.
func (r *TrackedRun) WaitProgress() {}

// Progress is fine on a run handle without progress=.
func (r *FulfilRun) Progress() {}

//stem:step name=crash-pay
func (s *Steps) CrashEveryStepPay(ctx runtime.StepContext) error { return nil }

// PayMock's crash test in the test helpers has the name of step
// CrashEveryStepPay's mock handle.
//
//stem:workflow name=p.pay-mock
func PayMock(ctx *PayMockContext, n int) (int, error) { return n, nil }

//stem:step name=select
func (s *Steps) Select(ctx runtime.StepContext) error { return nil }

// All is the user's own method on a generated context.
func (c *FooContext) All() {}

// RefundWorkflow's mock in the test helpers has the names of workflow
// Refund's: RefundWorkflowMock and RefundWorkflowCall.
//
//stem:step name=refund-workflow
func (s *Steps) RefundWorkflow(ctx runtime.StepContext) error { return nil }
