package storage

import (
	"encoding/json"
	"strings"
	"time"
)

// The rules of a well-formed request, one method per request type. Every
// store calls them first, so a malformed request is refused by all stores
// alike, in the same words, with nothing written.

// ValidateNewRuns checks the runs of a CreateRuns call: each needs an ID and
// a workflow.
func ValidateNewRuns(runs []NewRun) error {
	for i, r := range runs {
		if r.ID == "" {
			return invalid("create runs", "run %d has an empty ID", i)
		}
		if r.Workflow == "" {
			return invalid("create runs", "run %q has an empty workflow name", r.ID)
		}
		if !r.ParentPolicy.Valid() {
			return invalid("create runs", "run %q has unknown parent policy %q", r.ID, r.ParentPolicy)
		}
	}
	return nil
}

// Validate checks the query's status filter.
func (q ListRunsQuery) Validate() error {
	if q.Status != "" && !q.Status.Valid() {
		return invalid("list runs", "unknown run status %q", q.Status)
	}
	return nil
}

// Validate checks that the claim names its owner and a lease length.
func (r ClaimRequest) Validate() error {
	if r.Owner == "" {
		return invalid("claim", "empty owner")
	}
	return validLeaseFor("claim", r.LeaseFor)
}

// Validate checks the lease, the lease length and the checkpoint.
func (r CheckpointRequest) Validate() error {
	if err := r.Lease.validate("checkpoint"); err != nil {
		return err
	}
	if err := validLeaseFor("checkpoint", r.LeaseFor); err != nil {
		return err
	}
	return r.Checkpoint.validate("checkpoint")
}

// Validate checks the lease and the lease length.
func (r RecordAttemptsRequest) Validate() error {
	if err := r.Lease.validate("record attempts"); err != nil {
		return err
	}
	return validLeaseFor("record attempts", r.LeaseFor)
}

// Validate checks the lease and the lease length.
func (r HeartbeatRequest) Validate() error {
	if err := r.Lease.validate("heartbeat"); err != nil {
		return err
	}
	return validLeaseFor("heartbeat", r.LeaseFor)
}

// Validate checks the lease, the checkpoint and the wait, when set.
func (r SuspendRequest) Validate() error {
	if err := r.Lease.validate("suspend"); err != nil {
		return err
	}
	if r.Checkpoint != nil {
		if err := r.Checkpoint.validate("suspend"); err != nil {
			return err
		}
	}
	if w := r.Wait; w != nil {
		if w.Key == "" || w.Topic == "" {
			return invalid("suspend", "a wait needs a key and a topic")
		}
		if w.Kind != "" && !w.Kind.Valid() {
			return invalid("suspend", "unknown wait kind %q", w.Kind)
		}
	}
	if f := r.Refuse; f != nil {
		if r.Wait == nil || f.Key != r.Wait.Key {
			return invalid("suspend", "a refusal must name the key of the wait it re-registers")
		}
		if f.Attempt.Key != f.Key || f.Attempt.Error == "" {
			return invalid("suspend", "a refusal's attempt must be of key %q and say why", f.Key)
		}
	}
	return nil
}

// Validate checks the lease, the final status and the notification.
func (r CompleteRequest) Validate() error {
	if err := r.Lease.validate("complete"); err != nil {
		return err
	}
	if r.Status != StatusComplete && r.Status != StatusErrored {
		return invalid("complete", "status %q is not complete or errored", r.Status)
	}
	return r.Notify.validateNotify("complete")
}

// Validate checks the notification, when set.
func (r TerminateRequest) Validate() error {
	return r.Notify.validateNotify("terminate")
}

// Validate checks the run ID and the fork key.
func (r RestartRequest) Validate() error {
	if r.RunID == "" {
		return invalid("restart", "empty run ID")
	}
	if strings.ContainsAny(r.FromKey, "\n") {
		return invalid("restart", "step key %q has a newline", r.FromKey)
	}
	return nil
}

// Validate checks the run ID and the execution number.
func (q StepsQuery) Validate() error {
	if q.RunID == "" {
		return invalid("list steps", "empty run ID")
	}
	if q.Execution < 0 {
		return invalid("list steps", "execution %d is negative", q.Execution)
	}
	return nil
}

// Validate checks that every workflow and event type is named and its
// schemas are JSON.
func (c Catalog) Validate() error {
	for _, w := range c.Workflows {
		if w.Name == "" {
			return invalid("put catalog", "a workflow type has an empty name")
		}
		for _, s := range []json.RawMessage{w.InputSchema, w.OutputSchema} {
			if len(s) > 0 && !json.Valid(s) {
				return invalid("put catalog", "workflow %q has a schema that is not JSON", w.Name)
			}
		}
	}
	for _, e := range c.Events {
		if e.Topic == "" {
			return invalid("put catalog", "an event type has an empty topic")
		}
		if len(e.PayloadSchema) > 0 && !json.Valid(e.PayloadSchema) {
			return invalid("put catalog", "event %q has a schema that is not JSON", e.Topic)
		}
	}
	return nil
}

// Validate checks the topic.
func (r EmitRequest) Validate() error {
	if r.Topic == "" {
		return invalid("emit", "empty topic")
	}
	return nil
}

// Validate checks that the event names a run and a topic.
func (e Event) Validate() error {
	return e.check("send event")
}

func (e Event) check(what string) error {
	if e.RunID == "" {
		return invalid(what, "event has an empty run ID")
	}
	if e.Topic == "" {
		return invalid(what, "event has an empty topic")
	}
	return nil
}

func (e *Event) validateNotify(what string) error {
	if e == nil {
		return nil
	}
	return e.check(what + ": notify")
}

func (l Lease) validate(what string) error {
	if l.RunID == "" {
		return invalid(what, "lease has an empty run ID")
	}
	return nil
}

func (c *Checkpoint) validate(what string) error {
	if c.Key == "" {
		return invalid(what, "empty checkpoint key")
	}
	if !c.Kind.Valid() {
		return invalid(what, "checkpoint %q has unknown kind %q", c.Key, c.Kind)
	}
	return nil
}

func validLeaseFor(what string, d time.Duration) error {
	if d <= 0 {
		return invalid(what, "lease length %v is not positive", d)
	}
	return nil
}
