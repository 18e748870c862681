//go:build !otel

package main

import (
	"context"
	"errors"
	"io"

	"github.com/stemflow/stem/runtime"
)

// telemetryBuilt says that this build has no --otel and --metrics: they
// need the OpenTelemetry SDK and the Prometheus client, which the default
// build leaves out so that the first `go run ./example/orders` compiles
// only what the run needs. telemetry.go, built with -tags otel, has them.
const telemetryBuilt = false

// errNoTelemetry is what --otel and --metrics say in a build without them.
var errNoTelemetry = errors.New("--otel and --metrics are not in this build, which leaves the OpenTelemetry SDK out to build faster; " +
	"build it with -tags otel: go run -tags otel ./example/orders --otel")

// telemetry is nil in this build: the engine runs without hooks.
type telemetry struct{}

// newTelemetry refuses --otel and --metrics, and otherwise returns nil.
func newTelemetry(_ context.Context, traces bool, metrics string, _ io.Writer) (*telemetry, error) {
	if traces || metrics != "" {
		return nil, errNoTelemetry
	}
	return nil, nil
}

func (*telemetry) hooks() []runtime.Hooks { return nil }

func (*telemetry) observe(*runtime.Engine) (stop func() error, err error) {
	return func() error { return nil }, nil
}

func (*telemetry) startSpan(ctx context.Context, _ string) (_ context.Context, end func()) {
	return ctx, func() {}
}

func (*telemetry) tracing() bool { return false }

func (*telemetry) serving() (addr string, ok bool) { return "", false }

func (*telemetry) shutdown(context.Context) error { return nil }
