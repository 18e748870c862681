package runtime_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// parcel is the payload of the topic the shape tests declare.
type parcel struct {
	Tracking string `json:"tracking"`
	Weight   int    `json:"weight"`
}

// shapeEngine runs a workflow that waits on parcel.ready (declared with
// RegisterEvent) and then on parcel.note (declared nowhere), returning
// both.
func shapeEngine(t *testing.T, f *fixture) *runtime.Engine {
	t.Helper()
	e, _ := f.engine(time.Minute, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "parcel.track", func(c *runtime.WorkflowContext, _ int) (string, error) {
			p, err := runtime.WaitForEvent[parcel](c, "ready", "parcel.ready", 0)
			if err != nil {
				return "", err
			}
			note, err := runtime.WaitForEvent[string](c, "note", "parcel.note", 0)
			return p.Tracking + "/" + note, err
		}))
		must(t, runtime.RegisterEvent[parcel](e, "parcel.ready"))
	})
	return e
}

// wantShapeRefused checks that err refuses a payload of the wrong shape for
// topic, saying why (says).
func wantShapeRefused(t *testing.T, call string, err error, topic, says string) {
	t.Helper()
	if !errors.Is(err, runtime.ErrInvalidArgument) || !errors.Is(err, runtime.ErrDecode) {
		t.Fatalf("%s with a payload of the wrong shape: %v, want ErrInvalidArgument and ErrDecode", call, err)
	}
	if !strings.Contains(err.Error(), `"`+topic+`"`) || !strings.Contains(err.Error(), says) {
		t.Fatalf("%s: %q names neither the topic %q nor what is wrong", call, err, topic)
	}
}

// noRefusals checks that no payload reached the run's waits only to be
// refused there: the refused calls wrote nothing.
func noRefusals(t *testing.T, e *runtime.Engine, id string) {
	t.Helper()
	steps, err := e.ListSteps(waitCtx(t), id, 0)
	must(t, err)
	for _, s := range steps {
		if len(s.Attempts) > 0 {
			t.Fatalf("step %s of run %s has attempts %+v: a refused payload was written", s.Key, id, s.Attempts)
		}
	}
}

// SendEvent and Emit refuse a payload that does not decode into the type
// the engine registers its topic with, before writing it: the caller hears
// of it, rather than the waiting run refusing it later.
func TestSendEventRefusesPayloadOfRegisteredTopic(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e := shapeEngine(t, f)
	ctx := waitCtx(t)
	start(t, e)
	run, err := runtime.Start[int, string](ctx, e, "parcel.track", 0, runtime.WithID("p1"))
	must(t, err)
	eventually(t, "the run waits", func() bool { return status(t, e, "p1") == runtime.StatusWaiting })

	wantShapeRefused(t, "SendEvent", e.SendEvent(ctx, "p1", "parcel.ready", "ZX9"), "parcel.ready", "cannot unmarshal string")
	wantShapeRefused(t, "SendEvent", e.SendEvent(ctx, "p1", "parcel.ready", map[string]any{"tracking": 42}), "parcel.ready", "cannot unmarshal number")
	n, err := e.Emit(ctx, "parcel.ready", []int{1, 2, 3})
	wantShapeRefused(t, "Emit", err, "parcel.ready", "cannot unmarshal array")
	if n != 0 {
		t.Fatalf("a refused Emit reached %d runs, want 0", n)
	}
	// Unknown fields decode, as in the worker: not refused.
	n, err = e.Emit(ctx, "parcel.ready", map[string]any{"tracking": "ZX9", "weight": 3, "carrier": "post"})
	if err != nil || n != 1 {
		t.Fatalf("Emit of a payload that decodes: %d, %v; want 1, nil", n, err)
	}
	eventually(t, "the run waits for its note", func() bool {
		info, err := e.Get(ctx, "p1")
		return err == nil && info.WaitingFor == "parcel.note"
	})
	// A topic nobody declares is not checked (as before): delivered.
	must(t, e.SendEvent(ctx, "p1", "parcel.note", "fragile"))
	if got, err := run.Result(ctx); err != nil || got != "ZX9/fragile" {
		t.Fatalf("result %q, %v; want ZX9/fragile", got, err)
	}
	noRefusals(t, e, "p1")
}

// An engine that does not register a topic checks SendEvent's and Emit's
// payloads against the JSON Schema the engine that registers it recorded
// in the store's catalog; a topic the catalog does not record is not
// checked.
func TestSendEventRefusesPayloadOfCatalogTopic(t *testing.T) {
	t.Parallel()
	f := setup(t)
	worker := shapeEngine(t, f)
	ctx := waitCtx(t)
	start(t, worker)
	client, err := runtime.New(runtime.Config{Store: f.store})
	must(t, err)
	t.Cleanup(func() { client.Close() })
	eventually(t, "the worker records its catalog", func() bool {
		c, err := client.Catalog(ctx)
		return err == nil && slices.ContainsFunc(c.Events, func(ev storage.EventType) bool { return ev.Topic == "parcel.ready" })
	})
	info, err := client.StartJSON(ctx, "parcel.track", "p2", []byte(`0`))
	must(t, err)
	eventually(t, "the run waits", func() bool { return status(t, client, info.ID) == runtime.StatusWaiting })

	wantShapeRefused(t, "SendEvent", client.SendEvent(ctx, "p2", "parcel.ready", map[string]any{"tracking": 42}), "parcel.ready", "$.tracking: want string")
	n, err := client.Emit(ctx, "parcel.ready", "ZX9")
	wantShapeRefused(t, "Emit", err, "parcel.ready", "want object")
	if n != 0 {
		t.Fatalf("a refused Emit reached %d runs, want 0", n)
	}
	must(t, client.SendEvent(ctx, "p2", "parcel.ready", parcel{Tracking: "QR7", Weight: 2}))
	eventually(t, "the run waits for its note", func() bool {
		info, err := client.Get(ctx, "p2")
		return err == nil && info.WaitingFor == "parcel.note"
	})
	// Not in the catalog: not checked, and delivered as before.
	if n, err := client.Emit(ctx, "parcel.note", "urgent"); err != nil || n != 1 {
		t.Fatalf("Emit on a topic nobody declares: %d, %v; want 1, nil", n, err)
	}
	if info, err := client.Wait(ctx, "p2"); err != nil || string(info.Output) != `"QR7/urgent"` {
		t.Fatalf("run ended %+v, %v; want output QR7/urgent", info, err)
	}
	noRefusals(t, client, "p2")
}
