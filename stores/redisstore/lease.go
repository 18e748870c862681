package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/stemflow/stem/storage"
)

// Claim implements storage.Store. One script reads the ready and lease
// sets of the requested workflows in the requested queues, of the
// versions req.Versions allows, level by level from the highest
// priority, recoveries first within a level and then ready runs, each
// oldest first, and leases up to Limit of them, passing over the ready
// runs whose queue, partition or rate window is full (see claim.lua).
// Each workflow version has sets of its own, so runs of versions the
// claim does not take are never read.
func (s *Store) Claim(ctx context.Context, req storage.ClaimRequest) ([]storage.ClaimedRun, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if req.Empty() {
		return nil, nil
	}
	wfs, vers := versionFilter(req.Workflows, req.Versions)
	if len(wfs) == 0 {
		return nil, nil
	}
	qs := req.ClaimQueues()
	keys := make([]string, 0, 2*len(wfs))
	args := make([]any, 0, 4+3*len(wfs)+5*len(qs))
	args = append(args, req.Owner, req.Limit, durMicros(req.LeaseFor), len(wfs))
	for i, wf := range wfs {
		keys = append(keys, s.keys.laneReady(wf, qs[0].Name, 0, 0), s.keys.laneLeases(wf, qs[0].Name, 0, 0))
		args = appendVersions(append(args, wf), vers[i])
	}
	for _, q := range qs {
		args = append(args, q.Name, q.Concurrency, q.PartitionConcurrency, q.Rate, durMicros(q.RatePeriod))
	}
	v, err := s.run(ctx, claimScript, keys, args...)
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim: %w", err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redisstore: claim: unexpected reply")
	}
	out := make([]storage.ClaimedRun, 0, len(list))
	for _, item := range list {
		c, err := decodeClaim(req.Owner, item)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// NextWake reads the lowest score of the named workflows' ready and lease
// sets in the named queues, at every priority level, of the versions
// req.Versions allows, measured from the server's TIME.
func (s *Store) NextWake(ctx context.Context, req storage.NextWakeRequest) (storage.NextWake, error) {
	if err := req.Validate(); err != nil {
		return storage.NextWake{}, fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return storage.NextWake{}, err
	}
	wfs, vers := versionFilter(req.Workflows, req.Versions)
	if len(wfs) == 0 {
		return storage.NextWake{}, nil
	}
	qs := req.QueueNames()
	keys := make([]string, 0, 2*len(wfs))
	args := make([]any, 0, 1+3*len(wfs)+len(qs))
	args = append(args, len(wfs))
	for i, wf := range wfs {
		keys = append(keys, s.keys.laneReady(wf, qs[0], 0, 0), s.keys.laneLeases(wf, qs[0], 0, 0))
		args = appendVersions(append(args, wf), vers[i])
	}
	for _, q := range qs {
		args = append(args, q)
	}
	v, err := s.run(ctx, nextWakeScript, keys, args...)
	if err != nil {
		return storage.NextWake{}, fmt.Errorf("redisstore: next wake: %w", err)
	}
	list, ok := v.([]any)
	if !ok || len(list) > 1 {
		return storage.NextWake{}, fmt.Errorf("redisstore: next wake: unexpected reply %v", v)
	}
	if len(list) == 0 {
		return storage.NextWake{}, nil
	}
	str, _ := list[0].(string)
	us, err := strconv.ParseInt(str, 10, 64)
	if err != nil {
		return storage.NextWake{}, fmt.Errorf("redisstore: next wake: unexpected reply %v", v)
	}
	return storage.NextWake{Found: true, After: time.Duration(us) * time.Microsecond}, nil
}

// versionFilter sorts and deduplicates the workflows of a claim or
// NextWake and pairs each with the versions of it to read: nil for any
// version (no entry in versions), else the entry's versions sorted and
// deduplicated. A workflow whose entry lists no version is left out, for
// none of its runs may be taken.
func versionFilter(workflows []string, versions map[string][]int) ([]string, [][]int) {
	wfs := slices.Clone(workflows)
	slices.Sort(wfs)
	wfs = slices.Compact(wfs)
	out := wfs[:0]
	var vers [][]int
	for _, wf := range wfs {
		allowed, ok := versions[wf]
		if !ok {
			out = append(out, wf)
			vers = append(vers, nil)
			continue
		}
		if len(allowed) == 0 {
			continue
		}
		allowed = slices.Clone(allowed)
		slices.Sort(allowed)
		out = append(out, wf)
		vers = append(vers, slices.Compact(allowed))
	}
	return out, vers
}

// appendVersions appends a workflow's versions as the claim and NextWake
// scripts read them: their number, -1 for any version (nil), then each.
func appendVersions(args []any, vers []int) []any {
	if vers == nil {
		return append(args, -1)
	}
	args = append(args, len(vers))
	for _, v := range vers {
		args = append(args, v)
	}
	return args
}

// decodeClaim reads {id, token, {wf, pa, in, rec, ss, wk, wt, wn, wd, wa,
// dl, lu, vr, hd, cq}}.
func decodeClaim(owner string, item any) (storage.ClaimedRun, error) {
	var c storage.ClaimedRun
	parts, ok := item.([]any)
	if !ok || len(parts) != 3 {
		return c, fmt.Errorf("redisstore: claim: unexpected reply")
	}
	f, ok := parts[2].([]any)
	if !ok || len(f) != 15 {
		return c, fmt.Errorf("redisstore: claim: unexpected reply")
	}
	tok, _ := parts[1].(int64)
	c.Lease = storage.Lease{RunID: str(parts[0]), Owner: owner, Token: tok}
	c.Workflow = str(f[0])
	c.ParentID = str(f[1])
	c.Input = unmark(str(f[2]))
	rec, err := parseInt(str(f[3]))
	if err != nil {
		return c, err
	}
	c.Recoveries = int(rec)
	c.SuspendState = unmark(str(f[4]))
	if c.Wait, err = decodeWait(str(f[5]), str(f[6]), str(f[7]), str(f[8]), str(f[9])); err != nil {
		return c, err
	}
	if c.Deadline, err = timePtr(str(f[10])); err != nil {
		return c, err
	}
	if c.LeaseUntil, err = fromMicros(str(f[11])); err != nil {
		return c, err
	}
	v, err := parseInt(str(f[12]))
	if err != nil {
		return c, err
	}
	c.Version = int(v)
	if c.Headers, err = decodeHeaders(str(f[13])); err != nil {
		return c, err
	}
	c.CancelRequested, c.CancelReason = decodeCancel(str(f[14]))
	return c, nil
}

// The scripts of leases that scripts.go does not list: a heartbeat that
// says why a lease was lost, and the release that lets go of a run a live
// restart took.
var (
	heartbeatScript = newScript("heartbeat")
	letGoScript     = newScript("letgo")
)

func init() { allScripts = append(allScripts, heartbeatScript, letGoScript) }

// Heartbeat implements storage.Store. A lost lease says why.
func (s *Store) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (storage.HeartbeatResult, error) {
	var res storage.HeartbeatResult
	if err := req.Validate(); err != nil {
		return res, fmt.Errorf("redisstore: %w", err)
	}
	act, err := encodeActive(req.Step)
	if err != nil {
		return res, err
	}
	id := req.Lease.RunID
	v, err := s.run(ctx, heartbeatScript, []string{s.keys.run(id)}, req.Lease.Token, durMicros(req.LeaseFor), id, act, mark(req.Progress))
	if err != nil {
		return res, fmt.Errorf("redisstore: heartbeat %q: %w", id, err)
	}
	list, err := judged("heartbeat", req.Lease, v)
	if err != nil {
		return res, err
	}
	res.PauseRequested = len(list) > 1 && str(list[1]) == "1"
	res.CancelRequested = len(list) > 2 && str(list[2]) == "1"
	return res, nil
}

// judged is status for the scripts that reply {LEASELOST, status, token,
// lease until, now}: the lost lease says why.
func judged(op string, l storage.Lease, v any) ([]any, error) {
	list, ok := v.([]any)
	if !ok || len(list) != 5 || str(list[0]) != "LEASELOST" {
		return status(op, l.RunID, v)
	}
	tok, err := parseInt(str(list[2]))
	if err != nil {
		return nil, err
	}
	var until time.Time
	if lu := str(list[3]); lu != "" {
		if until, err = fromMicros(lu); err != nil {
			return nil, err
		}
	}
	now, err := fromMicros(str(list[4]))
	if err != nil {
		return nil, err
	}
	st := str(list[1])
	return nil, fmt.Errorf("redisstore: %s %q: %w", op, l.RunID,
		storage.LeaseLost(op, l, st != "", storage.RunStatus(st), tok, until, now))
}

// extend extends the lease to now+leaseFor, fenced, and then in mode "a"
// (RecordAttempts) clears the active step and appends encoded attempts,
// in mode "h" (Heartbeat) records the encoded active step act, if any.
func (s *Store) extend(ctx context.Context, op string, lease storage.Lease, leaseFor time.Duration, mode, act string, atts []any) error {
	id := lease.RunID
	args := make([]any, 0, 5+len(atts))
	args = append(args, lease.Token, durMicros(leaseFor), id, mode, act)
	args = append(args, atts...)
	v, err := s.run(ctx, attemptsScript, []string{s.keys.run(id), s.keys.attempts(id)}, args...)
	if err != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, id, err)
	}
	_, err = status(op, id, v)
	return err
}

// Suspend implements storage.Store. A wait's cases are stored with their
// kinds as given, so GetRun and Claim return the wait as registered; the
// scripts that deliver to a case write the checkpoint of its DeliveryKind
// (delivery_kind). A refusal is checked and applied by the same script
// before anything else. A run whose cancellation is requested parks
// ready now unless CancelSeen or a Hold says otherwise (see suspend.lua).
func (s *Store) Suspend(ctx context.Context, req storage.SuspendRequest) (storage.SuspendResult, error) {
	var res storage.SuspendResult
	if err := req.Validate(); err != nil {
		return res, fmt.Errorf("redisstore: %w", err)
	}
	id := req.Lease.RunID
	args := make([]any, 0, 20)
	args = append(args, req.Lease.Token, durMicros(req.LeaseFor), id)
	if cp := req.Checkpoint; cp != nil {
		errJSON, err := encodeError(cp.Error)
		if err != nil {
			return res, err
		}
		args = append(args, "1", cp.Key, string(cp.Kind), errJSON, encodeResult(cp.Input, cp.Output))
	} else {
		args = append(args, "", "", "", "", "")
	}
	if w := req.Wait; w != nil {
		args = append(args, "1", w.Key, w.Topic, string(w.Kind), microsPtr(w.Deadline))
	} else {
		args = append(args, "", "", "", "", "")
	}
	ready := ""
	if req.ReadyAt != nil {
		ready = micros(*req.ReadyAt)
	}
	args = append(args, ready, mark(req.SuspendState))
	if f := req.Refuse; f != nil {
		att, err := encodeAttempt(f.Attempt)
		if err != nil {
			return res, err
		}
		args = append(args, "1", f.Key, att)
	} else {
		args = append(args, "", "", "")
	}
	also := ""
	if req.Wait != nil {
		also = encodeAlso(req.Wait.Also)
	}
	hold, err := encodeHold(req.Hold)
	if err != nil {
		return res, fmt.Errorf("redisstore: suspend %q: %w", id, err)
	}
	seen := ""
	if req.CancelSeen {
		seen = "1"
	}
	args = append(args, mark(req.Progress), also, hold, seen)
	v, err := s.run(ctx, suspendScript, []string{s.keys.run(id), s.keys.checkpoints(id), s.keys.attempts(id)}, args...)
	if err != nil {
		return res, fmt.Errorf("redisstore: suspend %q: %w", id, err)
	}
	if list, ok := v.([]any); ok && len(list) > 0 && list[0] == "LEASELOST" && req.Checkpoint == nil && req.Wait == nil && req.Refuse == nil && ready != "" {
		// A release: it may let go of a run a live restart took.
		v, err := s.run(ctx, letGoScript, []string{s.keys.run(id)}, req.Lease.Token, id, ready)
		if err != nil {
			return res, fmt.Errorf("redisstore: suspend %q: %w", id, err)
		}
		_, err = judged("suspend", req.Lease, v)
		return res, err
	}
	if list, ok := v.([]any); ok && len(list) > 0 && list[0] == "INVALID" {
		return res, fmt.Errorf("redisstore: suspend %q: refuse %q: no event checkpoint of the key in the current execution: %w",
			id, req.Refuse.Key, storage.ErrInvalidState)
	}
	list, err := status("suspend", id, v)
	if err != nil {
		return res, err
	}
	switch list[0] {
	case "PAUSED":
		res.Paused = true
	case "DELIVERED":
		res.Delivered, err = deliveredOf("suspend", id, list)
	}
	return res, err
}

// TakeEvent implements storage.Store: takeevent.lua resolves the wait as
// suspend.lua delivers one (the same helpers), without parking.
func (s *Store) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (*storage.Checkpoint, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	id, w := req.Lease.RunID, req.Wait
	v, err := s.run(ctx, takeEventScript, []string{s.keys.run(id), s.keys.checkpoints(id)},
		req.Lease.Token, durMicros(req.LeaseFor), id, w.Key, w.Topic, string(w.Kind), encodeAlso(w.Also))
	if err != nil {
		return nil, fmt.Errorf("redisstore: take event %q: %w", id, err)
	}
	list, err := status("take event", id, v)
	if err != nil || list[0] != "DELIVERED" {
		return nil, err
	}
	return deliveredOf("take event", id, list)
}

// deliveredOf decodes the checkpoint of a {DELIVERED, encoding, key} reply.
func deliveredOf(op, id string, list []any) (*storage.Checkpoint, error) {
	if len(list) != 3 {
		return nil, fmt.Errorf("redisstore: %s %q: unexpected reply", op, id)
	}
	cp, err := decodeCheckpoint(str(list[2]), str(list[1]))
	if err != nil {
		return nil, err
	}
	return &cp, nil
}

// completionFields is how many script arguments describe a completion;
// see complete_run in scripts/lib/holder.lua.
const completionFields = 9

// appendCompletion appends the script arguments of a completion as
// complete_run reads them: final status, marked output, error JSON, the
// notify (notifyArgs), marked progress, the descendants' error JSON and
// the marked reason of the cancellations it requests.
func appendCompletion(args []any, req storage.CompleteRequest) ([]any, error) {
	errJSON, err := encodeError(req.Error)
	if err != nil {
		return nil, err
	}
	childJSON, err := encodeError(req.ChildError)
	if err != nil {
		return nil, err
	}
	args = append(args, string(req.Status), mark(req.Output), errJSON)
	args = append(args, notifyArgs(req.Notify)...)
	return append(args, mark(req.Progress), childJSON, markText(req.ChildCancel)), nil
}

// Complete implements storage.Store. A Notify whose target run does not
// exist or has finished is dropped: the child's result must not be lost
// because its parent went away. With ChildError the script terminates the
// descendants, and requests with ChildCancel the cancellation of those
// cancelled with their parent, as Terminate's does, in the same call.
func (s *Store) Complete(ctx context.Context, req storage.CompleteRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	id := req.Lease.RunID
	args, err := appendCompletion(append(make([]any, 0, 3+completionFields), req.Lease.Token, "", id), req)
	if err != nil {
		return err
	}
	v, err := s.run(ctx, completeScript, []string{s.keys.run(id)}, args...)
	if err != nil {
		return fmt.Errorf("redisstore: complete %q: %w", id, err)
	}
	_, err = status("complete", id, v)
	return err
}
