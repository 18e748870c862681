package stemotel

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/stemflow/stem/runtime"
)

// ScopeName is the instrumentation scope of the package's tracer and
// meter: their name, for views and filters.
const ScopeName = "github.com/stemflow/stem/stemotel"

// Options configure a Telemetry. The zero value uses the global
// providers and the W3C propagators.
type Options struct {
	// TracerProvider creates the tracer. Nil: otel.GetTracerProvider(),
	// the global one, which delegates to the provider set with
	// otel.SetTracerProvider, even later.
	TracerProvider trace.TracerProvider
	// MeterProvider creates the meter. Nil: otel.GetMeterProvider(), the
	// global one.
	MeterProvider metric.MeterProvider
	// Propagator writes the trace context of a start into the runs'
	// headers, and reads it back for each execution; and that of an
	// update's sending into the update's headers, read back for its
	// reply. Nil: W3C Trace
	// Context and Baggage. Not the global propagator: it propagates
	// nothing until otel.SetTextMapPropagator is called, and a run
	// started without its trace context stored can never join it again,
	// so its executions would be traces of their own.
	Propagator propagation.TextMapPropagator
	// StoreSpans makes each store call made inside a trace (an
	// execution's, a start's, a traced caller's) a span of its own, kind
	// client: an execution then shows its checkpoints, heartbeats and
	// loads. Calls outside any trace, such as the engine's polls for
	// ready runs, get no span: one trace per poll would bury the rest.
	// The store-latency metrics are recorded either way.
	StoreSpans bool
}

// Telemetry traces and measures engines: its Hooks go into
// runtime.Config.Hooks, of one engine or several, and Observe reports an
// engine's queues. Create one with New; it is safe for concurrent use.
type Telemetry struct {
	tracer     trace.Tracer
	meter      metric.Meter
	prop       propagation.TextMapPropagator
	storeSpans bool

	runsStarted   metric.Int64Counter
	runsFinished  metric.Int64Counter
	executions    metric.Int64Counter
	stepDuration  metric.Float64Histogram
	stepRetries   metric.Int64Counter
	leaseLost     metric.Int64Counter
	sealed        metric.Int64Counter
	storeDuration metric.Float64Histogram
	claimDuration metric.Float64Histogram

	queueReady   metric.Int64ObservableGauge
	queueOldest  metric.Float64ObservableGauge
	queueRunning metric.Int64ObservableGauge
	queueWaiting metric.Int64ObservableGauge
	unserved     metric.Int64ObservableGauge

	claimOK, claimFailed metric.MeasurementOption

	workflows cache[string, *workflowSets]
	steps     cache[stepID, *stepSets]
	ops       cache[string, *opSets]
	updates   cache[string, *updateSets]
}

// Bucket boundaries, in seconds: store calls take from tens of
// microseconds (in memory) to seconds (a struggling database); steps from
// a millisecond to minutes.
var (
	storeBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	stepBuckets  = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
)

// New returns a Telemetry with its instruments created.
func New(opts Options) (*Telemetry, error) {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	prop := opts.Propagator
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	t := &Telemetry{
		tracer:     tp.Tracer(ScopeName),
		meter:      mp.Meter(ScopeName),
		prop:       prop,
		storeSpans: opts.StoreSpans,
	}
	m := t.meter
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	t.runsStarted, err = m.Int64Counter("stem.runs.started", metric.WithUnit("{run}"),
		metric.WithDescription("Runs created, by workflow."))
	check(err)
	t.runsFinished, err = m.Int64Counter("stem.runs.finished", metric.WithUnit("{run}"),
		metric.WithDescription("Runs that ended complete or errored, by workflow and status."))
	check(err)
	t.executions, err = m.Int64Counter("stem.executions", metric.WithUnit("{execution}"),
		metric.WithDescription("Executions of claimed runs, by workflow and how they ended."))
	check(err)
	t.stepDuration, err = m.Float64Histogram("stem.step.duration", metric.WithUnit("s"),
		metric.WithDescription("Step attempts, by workflow, step and outcome (ok, retry, failed)."),
		metric.WithExplicitBucketBoundaries(stepBuckets...))
	check(err)
	t.stepRetries, err = m.Int64Counter("stem.step.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Failed step attempts that will be retried, by workflow and step."))
	check(err)
	t.leaseLost, err = m.Int64Counter("stem.lease.lost", metric.WithUnit("{execution}"),
		metric.WithDescription("Executions stopped because another worker took the run, by workflow."))
	check(err)
	t.sealed, err = m.Int64Counter("stem.sealed.handbacks", metric.WithUnit("{execution}"),
		metric.WithDescription("Runs handed back because this engine's codec cannot open them, by workflow and the key ID they are sealed with."))
	check(err)
	t.storeDuration, err = m.Float64Histogram("stem.store.duration", metric.WithUnit("s"),
		metric.WithDescription("Store calls, by method and outcome (ok, error)."),
		metric.WithExplicitBucketBoundaries(storeBuckets...))
	check(err)
	t.claimDuration, err = m.Float64Histogram("stem.claim.duration", metric.WithUnit("s"),
		metric.WithDescription("The engine's claims of ready runs, by outcome (ok, error)."),
		metric.WithExplicitBucketBoundaries(storeBuckets...))
	check(err)
	t.queueReady, err = m.Int64ObservableGauge("stem.queue.ready", metric.WithUnit("{run}"),
		metric.WithDescription("Runs ready and not yet claimed, by queue."))
	check(err)
	t.queueOldest, err = m.Float64ObservableGauge("stem.queue.oldest_ready", metric.WithUnit("s"),
		metric.WithDescription("How long the longest-waiting ready run of the queue has been ready."))
	check(err)
	t.queueRunning, err = m.Int64ObservableGauge("stem.queue.running", metric.WithUnit("{run}"),
		metric.WithDescription("Runs executing, by queue."))
	check(err)
	t.queueWaiting, err = m.Int64ObservableGauge("stem.queue.waiting", metric.WithUnit("{run}"),
		metric.WithDescription("Runs asleep or awaiting an event, by queue."))
	check(err)
	t.unserved, err = m.Int64ObservableGauge("stem.runs.unserved", metric.WithUnit("{run}"),
		metric.WithDescription("Runs in flight of a workflow no live engine registers (renamed or dropped by a deploy), by workflow."))
	check(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("stemotel: creating the instruments: %w", err)
	}
	t.claimOK = metric.WithAttributeSet(attribute.NewSet(keyOutcome.String("ok")))
	t.claimFailed = metric.WithAttributeSet(attribute.NewSet(keyOutcome.String("error")))
	t.workflows.make = newWorkflowSets
	t.steps.make = newStepSets
	t.ops.make = newOpSets
	t.updates.make = newUpdateSets
	return t, nil
}

// Hooks returns the hooks that trace and measure an engine, for
// runtime.Config.Hooks.
func (t *Telemetry) Hooks() runtime.Hooks {
	return runtime.Hooks{
		Start:     t.start,
		Execution: t.execute,
		Attempt:   t.attempt,
		Wait:      t.wait,
		Store:     t.store,
		Update:    t.update,
		Reply:     t.reply,
	}
}
