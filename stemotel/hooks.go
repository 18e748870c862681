package stemotel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// start is Hooks.Start: a producer span around the creation of the runs,
// whose trace context goes into each run's headers.
func (t *Telemetry) start(ctx context.Context, s *runtime.HookStart, next func(context.Context) error) error {
	w := t.workflows.get(s.Workflow)
	ctx, span := t.tracer.Start(ctx, w.startName, trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 4)
		attrs = append(attrs, w.attr, keyRuns.Int(len(s.Runs)))
		if len(s.Runs) > 0 {
			attrs = append(attrs, keyRunID.String(s.Runs[0].ID))
		}
		if s.ParentID != "" {
			attrs = append(attrs, keyParentRunID.String(s.ParentID))
		}
		span.SetAttributes(attrs...)
	}
	t.inject(ctx, s.Runs)
	err := next(ctx)
	created := 0
	for _, r := range s.Results {
		if r.Created {
			created++
		}
	}
	if created > 0 {
		t.runsStarted.Add(ctx, int64(created), w.started)
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// inject writes ctx's trace context into the headers of runs, each run's
// a copy of its own with the propagator's keys added.
func (t *Telemetry) inject(ctx context.Context, runs []storage.NewRun) {
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return // no trace to join (and no baggage)
	}
	for i := range runs {
		h, dropped := mergeHeaders(runs[i].Headers, carrier)
		if len(dropped) > 0 {
			otel.Handle(fmt.Errorf("stemotel: run %s: the propagator's headers %q do not fit beside the run's own within storage.ValidateHeaders' bounds; left out", runs[i].ID, dropped))
		}
		runs[i].Headers = h
	}
}

// mergeHeaders returns a copy of own with the keys of add set. When the
// result is not valid headers (storage.ValidateHeaders: a large baggage,
// too many headers), it leaves out the added keys, largest value first,
// until it is, and says which: tracing never fails a start. The trace
// context itself (W3C traceparent, 55 bytes) is the last to go.
func mergeHeaders(own map[string]string, add map[string]string) (map[string]string, []string) {
	h := make(map[string]string, len(own)+len(add))
	maps.Copy(h, own)
	maps.Copy(h, add)
	if storage.ValidateHeaders(h) == nil {
		return h, nil
	}
	keys := slices.Sorted(maps.Keys(add))
	slices.SortStableFunc(keys, func(a, b string) int { return len(add[b]) - len(add[a]) })
	var dropped []string
	for _, k := range keys {
		if v, ok := own[k]; ok {
			h[k] = v
		} else {
			delete(h, k)
		}
		dropped = append(dropped, k)
		if storage.ValidateHeaders(h) == nil {
			return h, dropped
		}
	}
	return own, dropped
}

// update is Hooks.Update: a producer span around the sending of an
// update, whose trace context goes into the update's headers, as a start's
// goes into its runs'.
func (t *Telemetry) update(ctx context.Context, u *runtime.HookUpdate, next func(context.Context) error) error {
	n := t.updates.get(u.Name)
	ctx, span := t.tracer.Start(ctx, n.sendName, trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(keyRunID.String(u.RunID), keyUpdateID.String(u.ID), n.attr)
	}
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	if len(carrier) > 0 {
		h, dropped := mergeHeaders(u.Headers, carrier)
		if len(dropped) > 0 {
			otel.Handle(fmt.Errorf("stemotel: update %s of run %s: the propagator's headers %q do not fit beside the update's own within storage.ValidateHeaders' bounds; left out", u.ID, u.RunID, dropped))
		}
		u.Headers = h
	}
	err := next(ctx)
	if span.IsRecording() {
		span.SetAttributes(keyUpdateCreated.Bool(u.Created))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	return err
}

// reply is Hooks.Reply: a consumer span whose parent is the update's
// sending, read from the update's headers as an execution reads its run's
// start, so the caller's trace shows the reply; it links to the execution
// that replied, and that execution's span gets an event of the reply.
func (t *Telemetry) reply(ctx context.Context, u runtime.HookUpdate) {
	n := t.updates.get(u.Name)
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, keyRunID.String(u.RunID), keyUpdateID.String(u.ID), n.attr)
	if u.Workflow != "" {
		attrs = append(attrs, keyWorkflow.String(u.Workflow))
	}
	exec := trace.SpanFromContext(ctx)
	if exec.IsRecording() {
		ev := make([]attribute.KeyValue, 0, 3)
		ev = append(ev, keyUpdateID.String(u.ID), n.attr)
		if u.Err != nil {
			ev = append(ev, keyUpdateFailed.Bool(true))
		}
		exec.AddEvent("stem.update.reply", trace.WithAttributes(ev...))
	}
	// The sender is the parent, not the execution the context carries:
	// without the sender's trace context, the reply is a trace of its
	// own, still linked to the execution.
	pctx := trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	if len(u.Headers) > 0 {
		pctx = t.prop.Extract(pctx, propagation.MapCarrier(u.Headers))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if sc := exec.SpanContext(); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	_, span := t.tracer.Start(pctx, n.replyName, opts...)
	if span.IsRecording() {
		span.SetAttributes(attrs...)
		if u.Err != nil {
			span.RecordError(u.Err)
			span.SetStatus(codes.Error, u.Err.Error())
		}
	}
	span.End()
}

// execute is Hooks.Execution: a consumer span whose parent is the start of
// the run, read from its headers.
func (t *Telemetry) execute(ctx context.Context, x *runtime.HookExecution, next func(context.Context)) {
	w := t.workflows.get(x.Workflow)
	// The run's start is the parent, not whatever span the context the
	// engine's Run was given carries: without a stored trace context, an
	// execution is a trace of its own.
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	if len(x.Headers) > 0 {
		ctx = t.prop.Extract(ctx, propagation.MapCarrier(x.Headers))
	}
	ctx, span := t.tracer.Start(ctx, w.executeName, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 5)
		attrs = append(attrs, keyRunID.String(x.RunID), w.attr, keyVersion.Int(x.Version), keyRecoveries.Int(x.Recoveries))
		if x.ParentID != "" {
			attrs = append(attrs, keyParentRunID.String(x.ParentID))
		}
		span.SetAttributes(attrs...)
	}
	next(ctx)
	if span.IsRecording() {
		span.SetAttributes(keyExecution.Int(x.Execution), keyOutcome.String(string(x.Outcome)))
		if x.Err != nil {
			span.RecordError(x.Err)
			if x.Outcome == runtime.OutcomeErrored || x.Outcome == runtime.OutcomeStopped {
				span.SetStatus(codes.Error, x.Err.Error())
			}
		}
	}
	span.End()

	t.executions.Add(ctx, 1, w.outcome(x.Outcome))
	switch x.Outcome {
	case runtime.OutcomeComplete:
		t.runsFinished.Add(ctx, 1, w.complete)
	case runtime.OutcomeErrored:
		t.runsFinished.Add(ctx, 1, w.errored)
	case runtime.OutcomeStopped:
		if errors.Is(x.Err, runtime.ErrLeaseLost) {
			t.leaseLost.Add(ctx, 1, w.leaseLost)
		}
	case runtime.OutcomeReleased:
		// A worker whose codec lacks a key: the metric names the key, so
		// an alert says which worker to fix with which key.
		if se := (*runtime.SealedError)(nil); errors.As(x.Err, &se) {
			t.sealed.Add(ctx, 1, metric.WithAttributes(w.attr, keyKeyID.String(se.KeyID)))
		}
	}
}

// attempt is Hooks.Attempt: a span under the execution's, which the step
// function's context carries.
func (t *Telemetry) attempt(ctx context.Context, a *runtime.HookAttempt, next func(context.Context)) {
	s := t.steps.get(stepID{a.Workflow, stepName(a.Key)})
	ctx, span := t.tracer.Start(ctx, s.spanName)
	if span.IsRecording() {
		span.SetAttributes(keyRunID.String(a.RunID), keyStepKey.String(a.Key), keyAttempt.Int(a.Attempt), keyAsync.Bool(a.Async))
	}
	began := time.Now()
	next(ctx)
	took := time.Since(began).Seconds()

	outcome := s.ok
	switch {
	case a.Err == nil:
	case a.Retry:
		outcome = s.retry
		t.stepRetries.Add(ctx, 1, s.retries)
	default:
		outcome = s.failed
	}
	t.stepDuration.Record(ctx, took, outcome)

	if span.IsRecording() {
		if a.Err != nil {
			span.RecordError(a.Err)
			span.SetStatus(codes.Error, a.Err.Error())
		}
		if a.Retry {
			span.SetAttributes(keyRetry.Bool(true), keyRetryAt.String(a.RetryAt.UTC().Format(time.RFC3339Nano)))
		} else {
			span.SetAttributes(keyRetry.Bool(false))
		}
	}
	span.End()
}

// wait is Hooks.Wait: an event on the execution's span.
func (t *Telemetry) wait(ctx context.Context, w runtime.HookWait) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	name := "stem.wait"
	if w.Kind == runtime.KindSleep {
		name = "stem.sleep"
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, keyStepKey.String(w.Key), keyWaitKind.String(string(w.Kind)))
	if len(w.Topics) > 0 {
		attrs = append(attrs, keyWaitTopics.StringSlice(w.Topics))
	}
	if !w.Until.IsZero() {
		attrs = append(attrs, keyWaitUntil.String(w.Until.UTC().Format(time.RFC3339Nano)))
	}
	span.AddEvent(name, trace.WithAttributes(attrs...))
}

// store is Hooks.Store: the call's latency, and with StoreSpans a client
// span when the call is made inside a trace.
func (t *Telemetry) store(ctx context.Context, op string, next func(context.Context) error) error {
	s := t.ops.get(op)
	var span trace.Span
	if t.storeSpans && trace.SpanContextFromContext(ctx).IsValid() {
		ctx, span = t.tracer.Start(ctx, s.spanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(s.attr))
	}
	began := time.Now()
	err := next(ctx)
	took := time.Since(began).Seconds()

	outcome, claim := s.ok, t.claimOK
	if err != nil {
		outcome, claim = s.failed, t.claimFailed
	}
	t.storeDuration.Record(ctx, took, outcome)
	if op == "Claim" {
		t.claimDuration.Record(ctx, took, claim)
	}
	if span != nil {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	return err
}
