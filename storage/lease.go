package storage

import (
	"fmt"
	"time"
)

// LeaseLoss says why a lease no longer holds.
type LeaseLoss string

// The reasons a lease is lost.
const (
	// LossUnknown: the store did not say why. Heartbeat always says; other
	// fenced writes may not.
	LossUnknown LeaseLoss = ""
	// LossTaken: another claim holds the run: the lease expired and a worker
	// claimed the run again.
	LossTaken LeaseLoss = "taken"
	// LossTerminated: the run was terminated.
	LossTerminated LeaseLoss = "terminated"
	// LossRestarted: the run was restarted while the lease was live; its
	// next execution waits until the holder lets go (see Store.Restart).
	LossRestarted LeaseLoss = "restarted"
	// LossEnded: the run is no longer running under the lease, and neither
	// another claim, a termination nor a live restart is why: its holder
	// released, parked or finished it, a restart found the lease already
	// expired, or the run is gone.
	LossEnded LeaseLoss = "ended"
)

// LeaseLostError is the ErrLeaseLost of a fenced write that says why the
// lease no longer holds. errors.Is(err, ErrLeaseLost) matches it;
// errors.As reaches it through the store's wrapping.
type LeaseLostError struct {
	// Op is the store method that was refused ("heartbeat").
	Op    string
	RunID string
	Token int64
	Loss  LeaseLoss
}

// Error says which lease of which run was lost, and why; the store's
// wrapping names the operation.
func (e *LeaseLostError) Error() string {
	var why string
	switch e.Loss {
	case LossTaken:
		why = ": another worker claimed the run"
	case LossTerminated:
		why = ": the run was terminated"
	case LossRestarted:
		why = ": the run was restarted"
	case LossEnded:
		why = ": the run is no longer running under this lease"
	}
	return fmt.Sprintf("run %q token %d: %v%s", e.RunID, e.Token, ErrLeaseLost, why)
}

// Unwrap returns ErrLeaseLost.
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }

// LeaseLost returns the error of a fenced write op whose lease l no longer
// holds, judging why from the run as stored at the same moment: found is
// false for an unknown run; status, token and leaseUntil are the run's, now
// the store's clock. Stores call it instead of restating the rule:
//
//   - a terminated run: LossTerminated;
//   - another token: LossTaken;
//   - the lease's token on a run that is not running while its lease has
//     not expired: only a Restart leaves a run so, LossRestarted;
//   - otherwise LossEnded.
func LeaseLost(op string, l Lease, found bool, status RunStatus, token int64, leaseUntil, now time.Time) *LeaseLostError {
	e := &LeaseLostError{Op: op, RunID: l.RunID, Token: l.Token, Loss: LossEnded}
	switch {
	case !found:
	case status == StatusTerminated:
		e.Loss = LossTerminated
	case token != l.Token:
		e.Loss = LossTaken
	case status == StatusRunning:
		// The lease holds now: the write was refused in an earlier state
		// that has since changed back, which a store's atomic check rules
		// out. Say nothing rather than guess.
		e.Loss = LossUnknown
	case leaseUntil.After(now):
		e.Loss = LossRestarted
	}
	return e
}

// Releases reports whether the request only hands the run back, ready by
// now: no Checkpoint, Wait or Refuse, and ReadyAt at or before now. Such a
// release is also how the holder of a lease that a Restart revoked lets go
// (see Store.Restart).
func (r SuspendRequest) Releases(now time.Time) bool {
	return r.Checkpoint == nil && r.Wait == nil && r.Refuse == nil && r.ReadyAt != nil && !r.ReadyAt.After(now)
}
