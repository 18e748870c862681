package stemotel_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemotel"
	"github.com/stemflow/stem/stores/memstore"
)

// A run started inside a request's span is traced under it: its start,
// each execution, each step and the spans the step's own code starts.
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("example")

	tel, err := stemotel.New(stemotel.Options{TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store, PollInterval: 10 * time.Millisecond, Hooks: []runtime.Hooks{tel.Hooks()}})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	err = runtime.Register(engine, "greet", func(c *runtime.WorkflowContext, name string) (string, error) {
		return runtime.Step(c, "compose@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
			_, span := tracer.Start(sc, "render greeting") // a child of the step's span
			defer span.End()
			return "Hello, " + name, nil
		})
	})
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- engine.Run(ctx) }()

	reqCtx, req := tracer.Start(context.Background(), "POST /greet")
	run, err := runtime.Start[string, string](reqCtx, engine, "greet", "Ada", runtime.WithID("greet-ada"))
	req.End()
	if err != nil {
		panic(err)
	}
	out, err := run.Result(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	stop()
	<-done // every execution, and its span, has ended

	printTree(spans.Ended(), trace.SpanID{}, 0)
	// Output:
	// Hello, Ada
	// POST /greet
	//   stem.start greet
	//     stem.execute greet
	//       stem.step compose@v1
	//         render greeting
}

// printTree prints the spans under parent, indented by depth, in the
// order they started.
func printTree(spans []sdktrace.ReadOnlySpan, parent trace.SpanID, depth int) {
	var children []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Parent().SpanID() == parent {
			children = append(children, s)
		}
	}
	slices.SortFunc(children, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	for _, s := range children {
		fmt.Println(strings.Repeat("  ", depth) + s.Name())
		printTree(spans, s.SpanContext().SpanID(), depth+1)
	}
}
