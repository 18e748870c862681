package enginetest

import (
	"strings"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var eventScenarios = []scenario{
	{"events/a payload that does not decode is refused and the run waits on", testRefusedPayload},
}

// shipment is the event the scenarios wait for.
type shipment struct {
	Tracking string `json:"tracking"`
}

func testRefusedPayload(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.Register(e, "ship", func(c *runtime.WorkflowContext, _ int) (string, error) {
			ev, err := runtime.WaitForEvent[shipment](c, "ready", "orders.ready", 0)
			return ev.Tracking, err
		}))
		f.must(runtime.RegisterEvent[shipment](e, "orders.ready"))
	})
	f.start(e)
	run, err := runtime.Start[int, string](f.ctx, e, "ship", 0, runtime.WithID("r1"))
	f.must(err)
	f.waitStatus(e, "r1", runtime.StatusWaiting)
	// The engine's JSON door refuses it before writing.
	if err := e.SendEventJSON(f.ctx, "r1", "orders.ready", []byte(`{"tracking":123}`)); err == nil {
		f.t.Fatal("SendEventJSON accepted a payload of the wrong type")
	}
	// A tool that writes to the store without checking (an older one) gets
	// it delivered; the worker refuses it and waits on.
	if _, err := f.store.SendEvent(f.ctx, storage.Event{RunID: "r1", Topic: "orders.ready", Payload: []byte(`[1,2,3]`)}); err != nil {
		f.t.Fatal(err)
	}
	var s *runtime.StepInfo
	f.eventually("the refused payload is listed and the run waits again", func() bool {
		s = findStep(f.steps(e, "r1", 0), "ready")
		return s != nil && len(s.Attempts) == 1 && f.info(e, "r1").Status == runtime.StatusWaiting
	})
	if s.Status != runtime.StepWaiting || !strings.Contains(s.Attempts[0].Error, "refused") {
		f.t.Fatalf("wait listed as %+v, want waiting with the refusal as a failed attempt", s)
	}
	f.must(e.SendEvent(f.ctx, "r1", "orders.ready", shipment{Tracking: "ZX9"}))
	if got, err := run.Result(f.ctx); err != nil || got != "ZX9" {
		f.t.Fatalf("result %q, %v; want ZX9", got, err)
	}
}
