package stemotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemotel"
)

// errRejected is what the approval workflow fails a "no" with.
var errRejected = errors.New("rejected")

// registerApproval registers "otel.approval": it takes two "decide"
// updates, checks each in a step and replies to it, the second time with
// an error when the answer is "no".
func registerApproval(e *runtime.Engine) {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(runtime.RegisterUpdate[string, string](e, "decide", nil))
	must(runtime.Register(e, "otel.approval", func(c *runtime.WorkflowContext, _ int) (string, error) {
		var last string
		for i := range 2 {
			u, err := runtime.AwaitUpdate[string, string](c, "decide", "decide")
			if err != nil {
				return "", err
			}
			last, err = runtime.Step(c, "check@v1", runtime.StepOptions{Autoversion: true}, func(runtime.StepContext) (string, error) {
				return "checked " + u.Request, nil
			})
			if err != nil {
				return "", err
			}
			if i == 1 && u.Request == "no" {
				err = u.Fail(c, errRejected)
			} else {
				err = u.Reply(c, last)
			}
			if err != nil {
				return "", err
			}
		}
		return last, nil
	}))
}

// An update's sending and its reply are one trace, the caller's: the reply
// span's parent is the sending span, read from the headers stored with the
// update, and it links to the execution that replied, in the run's own
// trace, whose span has an event of the reply. A reply with an error has
// status Error; an update sent again under its ID is a sending span that
// says so, and no second reply.
func TestUpdateSpans(t *testing.T) {
	t.Parallel()
	f := setup(t, stemotel.Options{})
	e := f.engine(f.store, runtime.Config{}, registerApproval)
	stop := run(t, e)
	bg := context.Background()
	sctx, starter := f.tracer.Start(bg, "starter")
	_, err := runtime.Start[int, string](sctx, e, "otel.approval", 0, runtime.WithID("approval"))
	starter.End()
	must(t, err)

	ctx, caller := f.tracer.Start(bg, "caller")
	got, err := runtime.CallUpdate[string](ctx, e, "approval", "decide", "yes", runtime.WithUpdateID("u-1"))
	caller.End()
	if err != nil || got != "checked yes" {
		t.Fatalf("update: %q, %v", got, err)
	}
	// Sent again under its ID: the stored reply, nothing handled again.
	if got, err := runtime.CallUpdate[string](ctx, e, "approval", "decide", "yes", runtime.WithUpdateID("u-1")); err != nil || got != "checked yes" {
		t.Fatalf("update sent again: %q, %v", got, err)
	}
	ctx2, caller2 := f.tracer.Start(bg, "caller 2")
	_, err = runtime.CallUpdate[string](ctx2, e, "approval", "decide", "no", runtime.WithUpdateID("u-2"))
	caller2.End()
	if !errors.Is(err, errRejected) && (err == nil || !strings.Contains(err.Error(), "rejected")) {
		t.Fatalf("failed update: %v; want the workflow's error", err)
	}
	wait(t, e, "approval")
	stop() // every execution, and the replies told within it, has ended

	u, err := f.store.GetUpdate(bg, "approval", "u-1")
	must(t, err)
	if tp := u.Headers["traceparent"]; !strings.Contains(tp, caller.SpanContext().TraceID().String()) {
		t.Errorf("update u-1 stored headers %v, want the caller's trace context", u.Headers)
	}

	sends := f.spansNamed("stem.update decide")
	if len(sends) != 3 {
		t.Fatalf("%d sending spans, want 3: %v", len(sends), names(sends))
	}
	for i, w := range []struct {
		parent  trace.Span
		id      string
		created bool
	}{{caller, "u-1", true}, {caller, "u-1", false}, {caller2, "u-2", true}} {
		s := sends[i]
		if s.Parent().SpanID() != w.parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindProducer {
			t.Errorf("sending span %d: parent %s, kind %s; want its caller's, producer", i+1, s.Parent().SpanID(), s.SpanKind())
		}
		if attr(s, "stem.run_id") != "approval" || attr(s, "stem.update.id") != w.id || attr(s, "stem.update.name") != "decide" || attr(s, "stem.update.created") != w.created {
			t.Errorf("sending span %d attributes %v", i+1, s.Attributes())
		}
		if s.Status().Code != codes.Unset {
			t.Errorf("sending span %d status %v", i+1, s.Status())
		}
	}

	replies := f.spansNamed("stem.update.reply decide")
	if len(replies) != 2 {
		t.Fatalf("%d reply spans, want 2 (none for the update sent again): %v", len(replies), names(replies))
	}
	execs := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, x := range f.spansNamed("stem.execute otel.approval") {
		execs[x.SpanContext().SpanID()] = x
	}
	for i, w := range []struct {
		send   sdktrace.ReadOnlySpan
		id     string
		status codes.Code
	}{{sends[0], "u-1", codes.Unset}, {sends[2], "u-2", codes.Error}} {
		r := replies[i]
		if r.Parent().SpanID() != w.send.SpanContext().SpanID() || !r.Parent().IsRemote() || r.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("reply span %d: parent %s (remote %v), kind %s; want the sending span, remote, consumer", i+1, r.Parent().SpanID(), r.Parent().IsRemote(), r.SpanKind())
		}
		if r.SpanContext().TraceID() != w.send.SpanContext().TraceID() {
			t.Errorf("reply span %d is in trace %s, not its caller's %s", i+1, r.SpanContext().TraceID(), w.send.SpanContext().TraceID())
		}
		if attr(r, "stem.run_id") != "approval" || attr(r, "stem.workflow") != "otel.approval" || attr(r, "stem.update.id") != w.id || attr(r, "stem.update.name") != "decide" {
			t.Errorf("reply span %d attributes %v", i+1, r.Attributes())
		}
		if r.Status().Code != w.status {
			t.Errorf("reply span %d status %v, want %v", i+1, r.Status(), w.status)
		}
		if w.status == codes.Error && !hasEvent(r, "exception", "exception.message", "rejected") {
			t.Errorf("reply span %d does not record its error: %v", i+1, r.Events())
		}
		links := r.Links()
		if len(links) != 1 {
			t.Fatalf("reply span %d has %d links, want the execution that replied", i+1, len(links))
		}
		x, ok := execs[links[0].SpanContext.SpanID()]
		if !ok {
			t.Fatalf("reply span %d links to %s, not an execution of the run", i+1, links[0].SpanContext.SpanID())
		}
		if x.SpanContext().TraceID() != starter.SpanContext().TraceID() {
			t.Errorf("the execution that replied to %s is in trace %s, not the run's %s", w.id, x.SpanContext().TraceID(), starter.SpanContext().TraceID())
		}
		if !hasEvent(x, "stem.update.reply", "stem.update.id", w.id) {
			t.Errorf("the execution that replied to %s has no event of the reply: %v", w.id, x.Events())
		}
		// The execution may have replied to both updates: its event of
		// this one's reply says whether it failed.
		if failed := replyEventFailed(x, w.id); failed != (w.status == codes.Error) {
			t.Errorf("the execution's reply event for %s says failed %v", w.id, failed)
		}
	}
}

// An update sent by an engine without the hooks carries no trace context:
// its reply is a trace of its own, linked to the execution that replied.
func TestReplyWithoutTraceContext(t *testing.T) {
	t.Parallel()
	f := setup(t, stemotel.Options{})
	e := f.engine(f.store, runtime.Config{}, registerApproval)
	stop := run(t, e)
	bg := context.Background()
	_, err := runtime.Start[int, string](bg, e, "otel.approval", 0, runtime.WithID("plain"))
	must(t, err)
	plain, err := runtime.New(runtime.Config{Store: f.store})
	must(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	registerApproval(plain)
	for _, id := range []string{"p-1", "p-2"} {
		if _, err := runtime.CallUpdate[string](bg, plain, "plain", "decide", "yes", runtime.WithUpdateID(id)); err != nil {
			t.Fatalf("update %s: %v", id, err)
		}
	}
	wait(t, e, "plain")
	stop()
	if sends := f.spansNamed("stem.update decide"); len(sends) != 0 {
		t.Errorf("%d sending spans from an engine without the hooks", len(sends))
	}
	replies := f.spansNamed("stem.update.reply decide")
	if len(replies) != 2 {
		t.Fatalf("%d reply spans, want 2", len(replies))
	}
	for _, r := range replies {
		if r.Parent().IsValid() || len(r.Links()) != 1 || r.Links()[0].SpanContext.TraceID() == r.SpanContext().TraceID() {
			t.Errorf("reply span %v: parent %v, links %v; want a root linked to the run's trace", r.Attributes(), r.Parent(), r.Links())
		}
	}
}

// replyEventFailed reports whether x's reply event of update id says the
// reply failed.
func replyEventFailed(x sdktrace.ReadOnlySpan, id string) bool {
	for _, ev := range x.Events() {
		if ev.Name != "stem.update.reply" {
			continue
		}
		var mine, failed bool
		for _, kv := range ev.Attributes {
			switch string(kv.Key) {
			case "stem.update.id":
				mine = kv.Value.AsString() == id
			case "stem.update.failed":
				failed = kv.Value.AsBool()
			}
		}
		if mine {
			return failed
		}
	}
	return false
}
