//go:build otel

// The OpenTelemetry wiring of --otel and --metrics, built only with
// -tags otel: the SDK, its exporters and the Prometheus client would more
// than double what the first build of the default run compiles.
// telemetry_off.go stands in for it otherwise.

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemotel"
)

// serviceName names this program in its traces and metrics.
const serviceName = "stem-example-orders"

// telemetry is what --otel and --metrics set up: the OpenTelemetry SDK's
// providers with their exporters, and the /metrics server.
type telemetry struct {
	stem   *stemotel.Telemetry
	tracer trace.Tracer // the program's own, for each order's root span
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	file   *os.File     // traces.json, when written
	srv    *http.Server // serving /metrics
	addr   string       // where, as a URL's host
}

// newTelemetry sets up tracing when traces is set and metrics on the
// address metrics when it is not empty; it returns nil when neither is
// asked for. Messages go to stderr, leaving the progress on stdout alone.
func newTelemetry(ctx context.Context, traces bool, metrics string, stderr io.Writer) (_ *telemetry, err error) {
	if !traces && metrics == "" {
		return nil, nil
	}
	t := &telemetry{tracer: noop.NewTracerProvider().Tracer("")}
	defer func() {
		if err != nil {
			t.shutdown(context.WithoutCancel(ctx))
		}
	}()
	// The SDK's own errors (an exporter that cannot send) are warnings,
	// like the store's.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { fmt.Fprintln(stderr, "orders: telemetry:", err) }))
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the
	// defaults, as everywhere.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attribute.String("service.name", serviceName)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("describing the service for telemetry: %w", err)
	}
	opts := stemotel.Options{TracerProvider: noop.NewTracerProvider()}

	if metrics != "" {
		ln, err := net.Listen("tcp", metrics)
		if err != nil {
			return nil, fmt.Errorf("--metrics %s: %w", metrics, err)
		}
		t.addr = displayAddr(ln.Addr().(*net.TCPAddr))
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("--metrics: %w", err)
		}
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
		opts.MeterProvider = t.mp
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := t.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(stderr, "orders: serving metrics:", err)
			}
		}()
		fmt.Fprintf(stderr, "orders: metrics on http://%s/metrics\n", t.addr)
	}

	if traces {
		var exp sdktrace.SpanExporter
		if endpoint := cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); endpoint != "" {
			// The exporter reads the OTEL_EXPORTER_OTLP_* variables itself.
			if exp, err = otlptracehttp.New(ctx); err != nil {
				return nil, fmt.Errorf("--otel: %w", err)
			}
			fmt.Fprintf(stderr, "orders: sending traces over OTLP/HTTP to %s\n", endpoint)
		} else {
			if t.file, err = os.Create(tracesFile); err != nil {
				return nil, fmt.Errorf("--otel: %w", err)
			}
			if exp, err = stdouttrace.New(stdouttrace.WithWriter(t.file)); err != nil {
				return nil, fmt.Errorf("--otel: %w", err)
			}
			fmt.Fprintf(stderr, "orders: writing traces to %s (set OTEL_EXPORTER_OTLP_ENDPOINT to send them to a collector)\n", tracesFile)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		opts.TracerProvider = t.tp
		t.tracer = t.tp.Tracer("github.com/stemflow/stem/example/orders")
	}

	if t.stem, err = stemotel.New(opts); err != nil {
		return nil, err
	}
	return t, nil
}

// hooks returns the engine's hooks: none without telemetry, so the
// default run pays nothing.
func (t *telemetry) hooks() []runtime.Hooks {
	if t == nil {
		return nil
	}
	return []runtime.Hooks{t.stem.Hooks()}
}

// observe reports the engine's queues with the metrics, until stop.
func (t *telemetry) observe(e *runtime.Engine) (stop func() error, err error) {
	if t == nil || t.mp == nil {
		return func() error { return nil }, nil
	}
	return t.stem.Observe(e)
}

// startSpan starts the root span of an order's trace: its start, and all
// its run's work, wherever and whenever it happens, are under it. end ends
// the span.
func (t *telemetry) startSpan(ctx context.Context, name string) (_ context.Context, end func()) {
	if t == nil {
		return ctx, func() {}
	}
	ctx, span := t.tracer.Start(ctx, name)
	return ctx, func() { span.End() }
}

// telemetryBuilt says that this build has --otel and --metrics.
const telemetryBuilt = true

// tracing reports whether traces are recorded.
func (t *telemetry) tracing() bool { return t != nil && t.tp != nil }

// serving reports whether metrics are served, and where.
func (t *telemetry) serving() (addr string, ok bool) {
	if t == nil || t.srv == nil {
		return "", false
	}
	return t.addr, true
}

// shutdown flushes the spans not yet exported and stops the exporters and
// the metrics server, within 5s.
func (t *telemetry) shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.file != nil {
		errs = append(errs, t.file.Close())
	}
	if t.srv != nil {
		errs = append(errs, t.srv.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shutting telemetry down: %w", err)
	}
	return nil
}

// displayAddr is a listener's address as a URL's host: localhost when it
// listens on every interface.
func displayAddr(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP == nil || a.IP.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, fmt.Sprint(a.Port))
}
