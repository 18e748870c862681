package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/stemflow/stem/storage"
)

// WaitForEvent suspends the run until an event of topic arrives for it (sent
// with SendEvent to this run, or emitted to the topic while it waits), and
// returns the event's payload decoded into T. name is the wait's durable
// key; a wait may sit in a loop, as a sleep may (see WorkflowContext.Sleep):
// the first call of name is keyed name and the n-th after it name#n, so
// each takes an event of its own, in the order they arrive.
// A timeout above zero bounds the wait: when it passes first, WaitForEvent
// returns an error matching ErrEventTimeout, checkpointed like any result so
// the wait never re-arms. The payload is seen exactly once: it is the wait's
// checkpoint.
//
// A payload that does not decode into T (sent by a tool that did not check
// it) is refused, not returned: it is taken back from the store, recorded as
// a failed attempt of the wait (visible in ListSteps), and the run waits
// again, its timeout counted anew from the refusal.
func WaitForEvent[T any](c *WorkflowContext, name, topic string, timeout time.Duration) (T, error) {
	var zero T
	x := c.exec
	x.checkStopped()
	if err := storage.CheckStepKey(name); err != nil {
		return zero, err
	}
	if err := validTopic(topic); err != nil {
		return zero, err
	}
	key, err := x.repeatKey(name, asWait)
	if err != nil {
		return zero, err
	}
	cp, ok, err := x.begin(c.detached, "wait:"+key, key)
	if err != nil {
		return zero, err
	}
	if ok {
		return decodeEvent[T](x, cp, topic, timeout)
	}
	w := x.claim.Wait
	if w == nil || w.Key != key {
		w = &storage.Wait{Key: key, Topic: topic, Kind: KindEvent}
		if d, ok := x.waitDeadline(key); ok {
			// Registered before, and the run woken by another case (a
			// future's): the wait keeps its deadline.
			w.Deadline = &d
		} else if timeout > 0 {
			// The first wait: its deadline is fixed now and persisted.
			d := x.engine.clock.Now().Add(timeout).UTC()
			w.Deadline = &d
		}
	}
	if w.Deadline != nil && !x.engine.clock.Now().Before(*w.Deadline) {
		// A registered wait whose deadline passed: a timeout, not a new wait.
		cp, _ := x.checkpoint(storage.Checkpoint{Key: key, Kind: KindEvent, Error: &storage.ErrorInfo{
			Message: x.engine.payloads.sealText(fmt.Sprintf("event %q (topic %q) did not arrive by %s", key, w.Topic, w.Deadline.Format(time.RFC3339Nano))),
			Code:    storage.CodeEventTimeout,
		}}, nil)
		return decodeCheckpoint[T](x, cp)
	}
	x.waiting(key, KindEvent, w, w.Deadline)
	cp = x.suspend(key, storage.SuspendRequest{Wait: w, ReadyAt: w.Deadline})
	return decodeEvent[T](x, cp, topic, timeout)
}

// decodeEvent returns a wait's checkpoint as T, refusing delivered payloads
// that do not decode until one does or the run parks.
func decodeEvent[T any](x *execution, cp storage.Checkpoint, topic string, timeout time.Duration) (T, error) {
	for {
		out, err := decodeCheckpoint[T](x, cp)
		if err == nil || cp.Error != nil || !(errors.Is(err, ErrDecode) || errors.Is(err, ErrPayloadTooLarge)) {
			return out, err
		}
		x.holdUndecodable(cp, err)
		e := x.engine
		now := e.clock.Now()
		a := storage.Attempt{Key: cp.Key, Number: x.pending[cp.Key].Number + 1, Started: now, Ended: now,
			Error: e.payloads.sealText(fmt.Sprintf("event payload refused: %v", err))}
		x.pending[cp.Key] = a
		x.forget(cp.Key)
		x.logger().Warn("stem: refused an event payload that does not decode; waiting again", "key", cp.Key, "topic", topic, "err", err)
		w := &storage.Wait{Key: cp.Key, Topic: topic, Kind: KindEvent}
		if timeout > 0 {
			d := now.Add(timeout).UTC()
			w.Deadline = &d
		}
		cp = x.suspend(cp.Key, storage.SuspendRequest{Wait: w, ReadyAt: w.Deadline, Refuse: &storage.Refusal{Key: cp.Key, Attempt: a}})
	}
}

// eventPayload encodes the payload of an event sent or emitted on topic
// (SendEvent, Emit) for the store, after refusing one that a run waiting
// on topic would refuse, so the caller hears of it and nothing is written:
// when this engine registers the topic (RegisterEvent), a payload that does
// not decode into its Go type, decoded as the waiting workflow decodes it;
// else, when an engine sharing the store recorded the topic in the
// catalog, one that does not match the recorded JSON Schema. Either is
// ErrInvalidArgument (and ErrDecode) naming the topic and what is wrong.
//
// A topic that neither this engine registers nor the catalog records is
// not checked, as before: a workflow may wait on a topic nobody declared
// (WaitForEvent needs no RegisterEvent), and an event may be sent before
// the engine that awaits it first records its catalog. Reading the catalog
// costs a store read per call, which only sends on undeclared topics pay.
func (e *Engine) eventPayload(ctx context.Context, topic string, payload any) ([]byte, error) {
	what := "payload of event " + topic
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("stem: encode %s: %w", what, err)
	}
	// Sealed first: encodeRaw refuses a payload over the limit before it
	// is decoded for the check.
	sealed, err := e.payloads.encodeRaw(what, raw)
	if err != nil {
		return nil, err
	}
	t, err := e.eventType(ctx, topic)
	if err != nil {
		return nil, err
	}
	switch {
	case t.typ != nil:
		// What the worker does with the stored payload, once opened.
		if err := decodeJSON(what, raw, e.cfg.MaxPayloadBytes, reflect.New(t.typ).Interface()); err != nil {
			return nil, fmt.Errorf("%w: event topic %q is registered with payload type %v, and a waiting run would refuse this one: %w",
				ErrInvalidArgument, topic, t.typ, err)
		}
	case t.recorded:
		if err := checkSchema(what, t.schema, raw); err != nil {
			return nil, fmt.Errorf("%w: event topic %q is recorded in the store's catalog with a payload schema this one does not match, so a waiting run would refuse it: %w",
				ErrInvalidArgument, topic, err)
		}
	}
	return sealed, nil
}
