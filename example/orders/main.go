// Command orders runs the example order workflows on a store — by default a
// SQLite file, stem.db, in the working directory — and shows their progress:
//
//	go run ./example/orders
//	go run ./example/orders --store postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//	go run ./example/orders --store redis://127.0.0.1:6379/0 --orders 200
//
// The orders have fixed IDs, so running it again after an interruption
// (Ctrl-C, or kill -9) resumes the unfinished runs instead of starting over.
//
// Built with -tags otel, it takes two more flags: with --otel it traces
// each order with OpenTelemetry (package stemotel), to the OTLP/HTTP
// endpoint OTEL_EXPORTER_OTLP_ENDPOINT names or else to traces.json; with
// --metrics it serves the engine's metrics for Prometheus, and keeps
// serving them once the orders are done. The default build leaves the
// OpenTelemetry SDK, its exporters and the Prometheus client out, which
// would more than double what its first build compiles:
//
//	go run -tags otel ./example/orders --otel
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 go run -tags otel ./example/orders --otel
//	go run -tags otel ./example/orders --metrics :9464    # then: curl localhost:9464/metrics
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
