package ui_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/ui"
)

// An action that writes sealed text (an event's payload, a termination's
// error) is refused when the dashboard's codec key is one no live worker
// holds, and writes nothing; with the workers' key it goes ahead.
func TestActionsRefuseAKeyNoWorkerHolds(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	ctx := context.Background()
	right, err := runtime.NewAESGCMCodec([]byte("0123456789abcdef0123456789abcdef"))
	must(t, err)
	wrong, err := runtime.NewAESGCMCodec([]byte("fedcba9876543210fedcba9876543210"))
	must(t, err)
	rightID, wrongID := runtime.CodecKeyIDs(right)[0], runtime.CodecKeyIDs(wrong)[0]
	worker, err := runtime.New(runtime.Config{Store: d.store, Codec: right, PollInterval: 5 * time.Millisecond})
	must(t, err)
	register(t, worker)
	t.Cleanup(func() { worker.Close() })
	runEngine(t, worker)
	_, err = worker.StartJSON(ctx, "approval", "order-1", []byte(`{}`))
	must(t, err)
	d.waitStatus("order-1", "waiting")

	blind, err := runtime.New(runtime.Config{Store: d.store, Codec: wrong})
	must(t, err)
	t.Cleanup(func() { blind.Close() })
	d.h = ui.New(blind, ui.Options{Authorize: d.authorize, AllowedHosts: testHosts})
	d.actThenRead("order-1", "event", url.Values{"topic": {"order.approved"}, "payload": {`{"by":"ann"}`}}, "error", "Could not send the event", wrongID, rightID)
	d.actThenRead("order-1", "terminate", url.Values{"reason": {"fraud"}}, "error", "Could not terminate the run", wrongID, rightID)
	if st := d.status("order-1"); st != "waiting" {
		t.Fatalf("after refused actions: run is %s, want waiting", st)
	}

	d.h = ui.New(worker, ui.Options{Authorize: d.authorize, AllowedHosts: testHosts})
	d.actThenRead("order-1", "event", url.Values{"topic": {"order.approved"}, "payload": {`{"by":"ann"}`}}, "ok", "Event order.approved sent")
	d.waitStatus("order-1", "complete")
}
