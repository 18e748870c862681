package storage

import (
	"encoding/json"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The rules of a well-formed request, one method per request type. Every
// store calls them first, so a malformed request is refused by all stores
// alike, in the same words, with nothing written.

// ValidateNewRuns checks the runs of a CreateRuns call: each needs a
// workflow name (CheckWorkflowName) and an ID. An ID chosen by a caller
// follows CheckRunID, so it holds no '/'. An ID with '/' is a child's,
// derived by the runtime from its parent's: ParentID + "/" + the call's
// key, with ParentID set. So no run can take the ID a parent will give its
// child. (Runs stored before these rules are not touched.)
func ValidateNewRuns(runs []NewRun) error {
	for i, r := range runs {
		if r.ID == "" {
			return invalid("create runs", "run %d has an empty ID", i)
		}
		if err := r.checkID(); err != nil {
			return err
		}
		if err := CheckWorkflowName(r.Workflow); err != nil {
			return invalid("create runs", "run %q: %s", r.ID, reason(err))
		}
		if !r.ParentPolicy.Valid() {
			return invalid("create runs", "run %q has unknown parent policy %q", r.ID, r.ParentPolicy)
		}
		if r.StartAt != nil && r.StartAt.IsZero() {
			return invalid("create runs", "run %q has a zero start time", r.ID)
		}
		if r.Deadline != nil && r.Deadline.IsZero() {
			return invalid("create runs", "run %q has a zero deadline", r.ID)
		}
		if r.Queue != "" {
			if err := CheckQueueName(r.Queue); err != nil {
				return invalid("create runs", "run %q: %s", r.ID, reason(err))
			}
		}
		if err := checkVisible("partition key", r.Partition, MaxNameLen); r.Partition != "" && err != nil {
			return invalid("create runs", "run %q: %s", r.ID, reason(err))
		}
		if r.Priority < MinPriority || r.Priority > MaxPriority {
			return invalid("create runs", "run %q has priority %d, outside %d to %d", r.ID, r.Priority, MinPriority, MaxPriority)
		}
		if r.Version < 0 || r.Version > MaxVersion {
			return invalid("create runs", "run %q has workflow version %d, outside 0 to %d", r.ID, r.Version, MaxVersion)
		}
		if err := ValidateHeaders(r.Headers); err != nil {
			return invalid("create runs", "run %q: %s", r.ID, err)
		}
		if err := ValidateAttrs("create runs: run "+quote(r.ID), r.Attributes); err != nil {
			return err
		}
		if l := r.Lease; l != nil {
			switch {
			case l.Owner == "":
				return invalid("create runs", "run %q is leased to an empty owner", r.ID)
			case l.For <= 0:
				return invalid("create runs", "run %q is leased for %v; want a positive lease", r.ID, l.For)
			case r.StartAt != nil:
				return invalid("create runs", "run %q is both leased at creation and delayed to a start time", r.ID)
			}
		}
		if err := r.checkPolicies(); err != nil {
			return err
		}
	}
	return nil
}

// checkPolicies checks the start policies, the event and the key of a
// create.
func (r NewRun) checkPolicies() error {
	const op = "create runs"
	if !r.OnExisting.Valid() {
		return invalid(op, "run %q has unknown policy %q for an existing run: want \"\", %q or %q", r.ID, r.OnExisting, ExistingFail, ExistingReplace)
	}
	if !r.OnEnded.Valid() {
		return invalid(op, "run %q has unknown policy %q for an ended run: want \"\", %q, %q or %q", r.ID, r.OnEnded, EndedReuse, EndedReject, EndedReuseFailed)
	}
	replacing := r.OnExisting == ExistingReplace || r.OnEnded == EndedReuse || r.OnEnded == EndedReuseFailed
	switch {
	case replacing && r.Replace == nil:
		return invalid(op, "run %q may replace a run of its ID but has no terms to end it with (Replace)", r.ID)
	case replacing && r.ParentID != "":
		return invalid(op, "child run %q cannot replace a run: a child's ID is its parent's", r.ID)
	case replacing && r.Lease != nil && r.OnExisting == ExistingReplace:
		return invalid(op, "run %q is leased at creation and may replace a running run", r.ID)
	}
	if ev := r.Event; ev != nil {
		if ev.Topic == "" {
			return invalid(op, "run %q: its event has an empty topic", r.ID)
		}
		if err := CheckTopic(ev.Topic); err != nil {
			return invalid(op, "run %q: its event: %s", r.ID, reason(err))
		}
	}
	if k := r.Key; k != nil {
		if err := checkVisible("start key", k.Key, MaxNameLen); err != nil {
			return invalid(op, "run %q: %s", r.ID, reason(err))
		}
		switch {
		case k.Debounce < 0:
			return invalid(op, "run %q has a negative debounce window %v", r.ID, k.Debounce)
		case k.KeepFirst && k.Debounce == 0:
			return invalid(op, "run %q keeps its key's first input, which only a debounce window has", r.ID)
		case k.Debounce > 0 && r.StartAt != nil:
			return invalid(op, "run %q has both a debounce window and a start time: the window sets when it starts", r.ID)
		case r.Lease != nil:
			return invalid(op, "run %q is leased at creation and has a start key", r.ID)
		case r.ParentID != "":
			return invalid(op, "child run %q has a start key", r.ID)
		}
	}
	return nil
}

func (r NewRun) checkID() error {
	if r.ParentID == "" || !strings.Contains(r.ID, "/") {
		if err := CheckRunID(r.ID); err != nil {
			return invalid("create runs", "%s", reason(err))
		}
	}
	if r.ParentID == "" {
		return nil
	}
	// The parent may be a run stored before these rules: its ID is only
	// held to what every store can hold. The call's key is the runtime's,
	// checked as a key.
	if err := checkDerived("run ID", r.ParentID, MaxDerivedLen); err != nil {
		return invalid("create runs", "run %q: parent %s", r.ID, reason(err))
	}
	if !strings.Contains(r.ID, "/") {
		return nil
	}
	call, ok := strings.CutPrefix(r.ID, r.ParentID+"/")
	if !ok || call == "" {
		return invalid("create runs", "run %q has parent %q: an ID with '/' is a child run's, its parent's ID, '/' and its call's key (%s/<call>)", r.ID, r.ParentID, r.ParentID)
	}
	if err := checkVisible("call key", call, MaxDerivedLen); err != nil {
		return invalid("create runs", "child run %q: %s", r.ID, reason(err))
	}
	if err := checkLen("run ID", r.ID, MaxDerivedLen); err != nil {
		return invalid("create runs", "child %s", reason(err))
	}
	return nil
}

// checkDerived checks a name derived from a run ID, which may be one stored
// before these rules: 1 to max bytes a store can hold.
func checkDerived(field, v string, max int) error {
	if err := checkLen(field, v, max); err != nil {
		return err
	}
	return checkStorable(field, v)
}

// maxChildTopicLen bounds the topic a parent waits on for its child:
// "stem.child/" and the child's ID.
const maxChildTopicLen = len(ReservedTopicPrefix+"child/") + MaxDerivedLen

// reason is a name error's text without the sentinel, for a message that
// wraps the sentinel itself.
func reason(err error) string {
	if ne, ok := err.(*NameError); ok {
		return ne.Reason
	}
	return err.Error()
}

// Validate checks the query's status filter, and that its other filters
// and cursor are strings a store can hold (valid UTF-8 without NUL).
func (q ListRunsQuery) Validate() error {
	if q.Status != "" && !q.Status.Valid() {
		return invalid("list runs", "unknown run status %q", q.Status)
	}
	for _, f := range []struct{ field, v string }{{"workflow filter", q.Workflow}, {"parent filter", q.ParentID}, {"queue filter", q.Queue}, {"cursor", q.After}} {
		if err := checkStorable(f.field, f.v); err != nil {
			return invalid("list runs", "%s", reason(err))
		}
	}
	for _, v := range q.Versions {
		if v < 0 || v > MaxVersion {
			return invalid("list runs", "version filter %d is outside 0 to %d", v, MaxVersion)
		}
	}
	if q.IDPrefix != "" {
		if err := checkStorable("ID prefix", q.IDPrefix); err != nil {
			return invalid("list runs", "%s", reason(err))
		}
	}
	if !q.CreatedFrom.IsZero() && !q.CreatedTo.IsZero() && !q.CreatedTo.After(q.CreatedFrom) {
		return invalid("list runs", "created range ends (%s) at or before it begins (%s)",
			q.CreatedTo.Format(time.RFC3339Nano), q.CreatedFrom.Format(time.RFC3339Nano))
	}
	if len(q.Where) > MaxAttrFilters {
		return invalid("list runs", "%d attribute filters, over the limit of %d", len(q.Where), MaxAttrFilters)
	}
	for _, f := range q.Where {
		if err := f.Validate(); err != nil {
			return invalid("list runs", "%s", reason(err))
		}
	}
	switch q.Order {
	case OrderID:
	case OrderCreated:
		if q.After != "" {
			if _, _, err := ParseCreatedCursor(q.After); err != nil {
				return invalid("list runs", "%s", err)
			}
		}
	default:
		return invalid("list runs", "unknown order %q (want \"\" for by ID, or %q)", q.Order, OrderCreated)
	}
	return nil
}

// Validate checks a CountRuns query: a workflow filter must be storable.
func (q CountRunsQuery) Validate() error {
	if err := checkStorable("workflow filter", q.Workflow); err != nil {
		return invalid("count runs", "%s", reason(err))
	}
	return nil
}

// validVersions checks a Versions filter: well-formed workflow names and
// versions from 0 to MaxVersion.
func validVersions(op string, versions map[string][]int) error {
	for w, vs := range versions {
		if err := CheckWorkflowName(w); err != nil {
			return invalid(op, "versions filter: %s", reason(err))
		}
		for _, v := range vs {
			if v < 0 || v > MaxVersion {
				return invalid(op, "versions filter of %q: version %d is outside 0 to %d", w, v, MaxVersion)
			}
		}
	}
	return nil
}

// Validate checks that the claim names its owner, well-formed workflow
// names (CheckWorkflowName) and a lease length.
func (r ClaimRequest) Validate() error {
	if r.Owner == "" {
		return invalid("claim", "empty owner")
	}
	if err := checkStorable("owner", r.Owner); err != nil {
		return invalid("claim", "%s", reason(err))
	}
	for _, w := range r.Workflows {
		if err := CheckWorkflowName(w); err != nil {
			return invalid("claim", "%s", reason(err))
		}
	}
	if err := validQueues("claim", r.Queues); err != nil {
		return err
	}
	if err := validVersions("claim", r.Versions); err != nil {
		return err
	}
	return validLeaseFor("claim", r.LeaseFor)
}

// Validate checks the workflow names (CheckWorkflowName).
func (r NextWakeRequest) Validate() error {
	for _, w := range r.Workflows {
		if err := CheckWorkflowName(w); err != nil {
			return invalid("next wake", "%s", reason(err))
		}
	}
	for _, q := range r.Queues {
		if err := CheckQueueName(q); err != nil {
			return invalid("next wake", "%s", reason(err))
		}
	}
	return validVersions("next wake", r.Versions)
}

// Validate checks the lease, the lease length, the checkpoint and the
// attempts' keys.
func (r CheckpointRequest) Validate() error {
	if err := r.Lease.validate("checkpoint"); err != nil {
		return err
	}
	if err := validLeaseFor("checkpoint", r.LeaseFor); err != nil {
		return err
	}
	if err := r.Checkpoint.validate("checkpoint"); err != nil {
		return err
	}
	if err := validAttempts("checkpoint", r.Attempts); err != nil {
		return err
	}
	if err := validInteractions(r.Reply, r.Streams); err != nil {
		return err
	}
	if err := ValidateAttrs("checkpoint", r.Attributes); err != nil {
		return err
	}
	if c := r.Complete; c != nil {
		switch {
		case r.Busy:
			return invalid("checkpoint", "a busy checkpoint cannot complete the run")
		case c.Lease != (Lease{}) && c.Lease != r.Lease:
			return invalid("checkpoint", "the completion's lease (run %q, token %d) is not the checkpoint's (run %q, token %d)", c.Lease.RunID, c.Lease.Token, r.Lease.RunID, r.Lease.Token)
		}
		done := *c
		done.Lease = r.Lease
		return done.Validate()
	}
	return nil
}

// Completion is the request's Complete under the request's lease, nil
// when it has none.
func (r CheckpointRequest) Completion() *CompleteRequest {
	if r.Complete == nil {
		return nil
	}
	c := *r.Complete
	c.Lease = r.Lease
	return &c
}

// Validate checks the lease, the lease length and the attempts' keys.
func (r RecordAttemptsRequest) Validate() error {
	if err := r.Lease.validate("record attempts"); err != nil {
		return err
	}
	if err := validLeaseFor("record attempts", r.LeaseFor); err != nil {
		return err
	}
	return validAttempts("record attempts", r.Attempts)
}

// Validate checks the lease, the lease length and the active step's key.
func (r HeartbeatRequest) Validate() error {
	if err := r.Lease.validate("heartbeat"); err != nil {
		return err
	}
	if r.Step != nil {
		if err := validStoredKey("heartbeat", r.Step.Key); err != nil {
			return err
		}
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
	if err := r.Wait.validateCases("suspend"); err != nil {
		return err
	}
	if h := r.Hold; h != nil {
		if h.Reason == "" || len(h.Reason) > MaxHoldReason {
			return invalid("suspend", "a hold must say why, in at most %d bytes", MaxHoldReason)
		}
		if y := h.Since.Year(); h.Since.IsZero() || y < 1 || y > 9999 {
			return invalid("suspend", "a hold needs its time, in the years 1 to 9999")
		}
		if h.Position < 0 || h.Execution < 1 {
			return invalid("suspend", "a hold's position must be 0 or more and its execution 1 or more")
		}
		if r.Checkpoint != nil || r.Wait != nil || r.Refuse != nil {
			return invalid("suspend", "a hold hands the run back untouched: no checkpoint, wait or refusal")
		}
	}
	if f := r.Refuse; f != nil {
		if !r.Wait.HasKey(f.Key) {
			return invalid("suspend", "a refusal must name the key of a case of the wait it re-registers")
		}
		if f.Attempt.Key != f.Key || f.Attempt.Error == "" {
			return invalid("suspend", "a refusal's attempt must be of key %q and say why", f.Key)
		}
	}
	return nil
}

// Validate checks a TakeEventRequest: a lease, and a wait whose cases are
// valid with distinct keys and topics.
func (r TakeEventRequest) Validate() error {
	if err := r.Lease.validate("take event"); err != nil {
		return err
	}
	if r.Wait == nil {
		return invalid("take event", "a wait is required")
	}
	return r.Wait.validateCases("take event")
}

// validateCases checks every case of a wait (nil: none) and that their
// keys and topics are distinct.
func (w *Wait) validateCases(op string) error {
	keys, topics := map[string]bool{}, map[string]bool{}
	for _, c := range w.Cases() {
		if err := c.validate(); err != nil {
			return err
		}
		if keys[c.Key] {
			return invalid(op, "wait cases share the key %q", c.Key)
		}
		if topics[c.Topic] {
			return invalid(op, "wait cases share the topic %q", c.Topic)
		}
		keys[c.Key], topics[c.Topic] = true, true
	}
	return nil
}

// validate checks a wait's case: a key, a known kind, and a topic: a
// caller's event wait needs one by CheckTopic (never a reserved one); a
// parent waiting on its child (KindChild) waits on the runtime's own topic
// for it, derived from the child's ID.
func (c WaitCase) validate() error {
	if c.Key == "" || c.Topic == "" {
		return invalid("suspend", "a wait needs a key and a topic")
	}
	if c.Kind != "" && c.Kind != KindEvent && c.Kind != KindChild && c.Kind != KindUpdate {
		return invalid("suspend", "unknown wait kind %q", c.Kind)
	}
	if err := validStoredKey("suspend", c.Key); err != nil {
		return err
	}
	var err error
	switch c.DeliveryKind() {
	case KindChild:
		err = checkDerived("event topic", c.Topic, maxChildTopicLen)
	case KindUpdate:
		name, ok := UpdateNameOf(c.Topic)
		if !ok {
			return invalid("suspend", "wait %q: an update case waits on an update topic (%s<name>), not %q", c.Key, UpdateTopicPrefix, c.Topic)
		}
		err = CheckUpdateName(name)
	default:
		err = CheckTopic(c.Topic)
	}
	if err != nil {
		return invalid("suspend", "wait %q: %s", c.Key, reason(err))
	}
	return nil
}

// HasKey reports whether a case of the wait (nil: none) has the key.
func (w *Wait) HasKey(key string) bool {
	for _, c := range w.Cases() {
		if c.Key == key {
			return true
		}
	}
	return false
}

// Validate checks the lease and the children's cancellation reason.
func (r ContinueRequest) Validate() error {
	if err := r.Lease.validate("continue as new"); err != nil {
		return err
	}
	return validCancelReason("continue as new", r.ChildCancel)
}

// Validate checks the lease, the final status and the notification.
func (r CompleteRequest) Validate() error {
	if err := r.Lease.validate("complete"); err != nil {
		return err
	}
	if r.Status != StatusComplete && r.Status != StatusErrored {
		return invalid("complete", "status %q is not complete or errored", r.Status)
	}
	if err := validCancelReason("complete", r.ChildCancel); err != nil {
		return err
	}
	return r.Notify.validateNotify("complete")
}

// Validate checks the notification, when set, and the children's
// cancellation reason.
func (r TerminateRequest) Validate() error {
	if err := validCancelReason("terminate", r.ChildCancel); err != nil {
		return err
	}
	return r.Notify.validateNotify("terminate")
}

// Validate checks the run ID and the reason: valid UTF-8 without control
// characters (line breaks and tabs aside), of at most MaxCancelReason
// bytes.
func (r CancelRequest) Validate() error {
	if r.RunID == "" {
		return invalid("cancel", "empty run ID")
	}
	return validCancelReason("cancel", r.Reason)
}

// validCancelReason checks a cancellation's reason (empty is allowed).
func validCancelReason(what, reason string) error {
	if len(reason) > MaxCancelReason {
		return invalid(what, "the reason is %d bytes, over the limit of %d", len(reason), MaxCancelReason)
	}
	for i, r := range reason {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(reason[i:]); n <= 1 {
				return invalid(what, "the reason has invalid UTF-8 at byte %d", i)
			}
		case unicode.IsControl(r) && r != '\n' && r != '\t':
			return invalid(what, "the reason has the control character %q at byte %d", r, i)
		}
	}
	return nil
}

// Validate checks the run ID and the fork key, when set.
func (r RestartRequest) Validate() error {
	if r.RunID == "" {
		return invalid("restart", "empty run ID")
	}
	if r.IfExecution < 0 {
		return invalid("restart", "run %q: expected execution %d is negative", r.RunID, r.IfExecution)
	}
	if r.FromKey != "" {
		return validStoredKey("restart", r.FromKey)
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

// Validate checks that every workflow and event type is well named
// (CheckWorkflowName, CheckTopic) and its schemas are JSON.
func (c Catalog) Validate() error {
	for _, w := range c.Workflows {
		if w.Name == "" {
			return invalid("put catalog", "a workflow type has an empty name")
		}
		if err := CheckWorkflowName(w.Name); err != nil {
			return invalid("put catalog", "%s", reason(err))
		}
		if err := checkStorable("worker", w.Worker); err != nil {
			return invalid("put catalog", "workflow %q: %s", w.Name, reason(err))
		}
		for _, s := range []json.RawMessage{w.InputSchema, w.OutputSchema} {
			if len(s) > 0 && !json.Valid(s) {
				return invalid("put catalog", "workflow %q has a schema that is not JSON", w.Name)
			}
		}
		if w.Queue != "" {
			if err := CheckQueueName(w.Queue); err != nil {
				return invalid("put catalog", "workflow %q: %s", w.Name, reason(err))
			}
		}
		if w.Retention != nil && *w.Retention < 0 {
			return invalid("put catalog", "workflow %q has a negative retention", w.Name)
		}
		if w.Timeout < 0 {
			return invalid("put catalog", "workflow %q has a negative timeout", w.Name)
		}
		if err := ValidateAttrDecls("put catalog: workflow "+quote(w.Name), w.Attributes); err != nil {
			return err
		}
	}
	qs := make([]Queue, len(c.Queues))
	for i, q := range c.Queues {
		qs[i] = q.Queue
		if err := checkStorable("worker", q.Worker); err != nil {
			return invalid("put catalog", "queue %q: %s", q.Name, reason(err))
		}
	}
	if err := validQueues("put catalog", qs); err != nil {
		return err
	}
	for _, e := range c.Events {
		if e.Topic == "" {
			return invalid("put catalog", "an event type has an empty topic")
		}
		if name, ok := UpdateNameOf(e.Topic); ok {
			if err := CheckUpdateName(name); err != nil {
				return invalid("put catalog", "%s", reason(err))
			}
		} else if err := CheckTopic(e.Topic); err != nil {
			return invalid("put catalog", "%s", reason(err))
		}
		if err := checkStorable("worker", e.Worker); err != nil {
			return invalid("put catalog", "event %q: %s", e.Topic, reason(err))
		}
		if len(e.PayloadSchema) > 0 && !json.Valid(e.PayloadSchema) {
			return invalid("put catalog", "event %q has a schema that is not JSON", e.Topic)
		}
	}
	return nil
}

// Validate checks the topic (CheckTopic: a reserved topic is refused).
func (r EmitRequest) Validate() error {
	if r.Topic == "" {
		return invalid("emit", "empty topic")
	}
	if err := CheckTopic(r.Topic); err != nil {
		return invalid("emit", "%s", reason(err))
	}
	return nil
}

// Validate checks that the event names a run and a topic (CheckTopic: a
// reserved topic is refused).
func (e Event) Validate() error {
	const what = "send event"
	if err := e.check(what); err != nil {
		return err
	}
	if err := checkStorable("run ID", e.RunID); err != nil {
		return invalid(what, "%s", reason(err))
	}
	if err := CheckTopic(e.Topic); err != nil {
		return invalid(what, "%s", reason(err))
	}
	return nil
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

// validateNotify checks a notification, which the runtime sends on its own
// (reserved) topics: a child's outcome to its parent.
func (e *Event) validateNotify(what string) error {
	if e == nil {
		return nil
	}
	what += ": notify"
	if err := e.check(what); err != nil {
		return err
	}
	if err := checkDerived("event topic", e.Topic, maxChildTopicLen); err != nil {
		return invalid(what, "%s", reason(err))
	}
	return nil
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
	if err := validStoredKey(what, c.Key); err != nil {
		return err
	}
	if !c.Kind.Valid() {
		return invalid(what, "checkpoint %q has unknown kind %q", c.Key, c.Kind)
	}
	return nil
}

// validStoredKey checks a checkpoint key as stored: a step key (see
// CheckStepKey) with what the runtime appends ("#N", "/result"), so '#'
// is allowed and the bound is MaxDerivedLen.
func validStoredKey(what, key string) error {
	if err := checkVisible("step key", key, MaxDerivedLen); err != nil {
		return invalid(what, "%s", reason(err))
	}
	return nil
}

func validAttempts(what string, as []Attempt) error {
	for _, a := range as {
		if err := validStoredKey(what, a.Key); err != nil {
			return err
		}
	}
	return nil
}

func validLeaseFor(what string, d time.Duration) error {
	if d <= 0 {
		return invalid(what, "lease length %v is not positive", d)
	}
	return nil
}
