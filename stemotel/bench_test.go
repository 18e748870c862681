package stemotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemotel"
)

// The cost of the hooks around one step attempt and one store call:
// with no-op providers, with an SDK that samples nothing, and with one
// that records every span.
func BenchmarkHooks(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	for _, c := range []struct {
		name string
		opts stemotel.Options
	}{
		{"noop", stemotel.Options{TracerProvider: noop.NewTracerProvider()}},
		{"unsampled", stemotel.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())), MeterProvider: mp}},
		{"recorded", stemotel.Options{TracerProvider: sdktrace.NewTracerProvider(), MeterProvider: mp}},
	} {
		tel, err := stemotel.New(c.opts)
		if err != nil {
			b.Fatal(err)
		}
		h := tel.Hooks()
		ctx := context.Background()
		b.Run("attempt/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a := &runtime.HookAttempt{RunID: "run-1", Workflow: "bench", Key: "pack@v1#3", Attempt: 1, Started: time.Now()}
				h.Attempt(ctx, a, func(context.Context) { a.Err, a.Retry = errors.ErrUnsupported, true })
			}
		})
		b.Run("store/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = h.Store(ctx, "Checkpoint", func(context.Context) error { return nil })
			}
		})
	}
}
