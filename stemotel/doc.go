// Package stemotel traces and measures Stem engines with OpenTelemetry.
//
// New builds a Telemetry from an OpenTelemetry TracerProvider,
// MeterProvider and TextMapPropagator (the global providers by default);
// its Hooks go into runtime.Config.Hooks, and Observe reports the
// engine's queues:
//
//	tel, err := stemotel.New(stemotel.Options{})
//	if err != nil { ... }
//	engine, err := runtime.New(runtime.Config{Store: store, Hooks: []runtime.Hooks{tel.Hooks()}})
//	if err != nil { ... }
//	stop, err := tel.Observe(engine)
//	if err != nil { ... }
//	defer stop()
//
// The package uses only the OpenTelemetry API: the application chooses
// the SDK and its exporters, and without one every span and measurement
// is a no-op.
//
// # Traces
//
// A run is one trace, however long it lives and wherever it executes. The
// start of runs is a span, "stem.start <workflow>" (kind producer), under
// the starter's context; its trace context is stored with each run (the
// propagator writes it into storage.NewRun.Headers), and every execution
// of the run, on any engine, days later, is a span "stem.execute
// <workflow>" (kind consumer) whose parent is that start span. A step
// attempt is a span "stem.step <key>" under its execution's span, and the
// step function's context carries it, so the spans the step's own code
// starts are its children. A child run starts inside its parent's
// execution, so the child's spans are in the parent's trace. A sleep or
// wait is an event, "stem.sleep" or "stem.wait", on the execution's span.
// With Options.StoreSpans, each store call made inside a trace is a span
// "stem.store <Op>" (kind client) too.
//
// An update's caller and its handling are linked as a run's starter and
// its executions are. Sending an update is a span "stem.update <name>"
// (kind producer) under the caller's context, whose trace context is
// stored with the update (in its headers); the workflow's reply, once
// written, is a span "stem.update.reply <name>" (kind consumer) whose
// parent is that sending span, so the caller's trace shows when and how
// its update was answered, however much later and on whichever engine.
// The reply span links to the execution that replied, in the run's own
// trace, and that execution's span has an event "stem.update.reply". An
// update sent without a trace context (by an engine without these hooks)
// has a reply span that is a trace of its own, still linked. An update
// its validator refuses is refused before anything is sent, and has no
// span.
//
// The spans carry these attributes:
//
//	stem.workflow          the workflow's name (start, execute, reply)
//	stem.run_id            the run's ID (start: the first run's; execute, step, update, reply)
//	stem.runs              how many runs the start created (start)
//	stem.parent_run_id     the starting run, for a child (start, execute)
//	stem.workflow.version  the version the run started under (execute)
//	stem.recoveries        claims from dead workers since the run's last progress (execute)
//	stem.execution         the run's execution number (execute)
//	stem.outcome           how the execution ended: complete, errored, parked, ... (execute)
//	stem.step.key          the step's checkpoint key (step; sleep and wait events)
//	stem.step.attempt      the attempt's number, from 1 (step)
//	stem.step.async        the attempt is a step future's (step)
//	stem.step.retry        the step will be attempted again (step)
//	stem.step.retry_at     when, RFC 3339 (step)
//	stem.wait.kind         sleep, event, child or select (sleep and wait events)
//	stem.wait.topics       the event topics waited on (wait events)
//	stem.wait.until        when the run wakes if nothing comes first, RFC 3339 (sleep and wait events)
//	stem.store.op          the store method (store)
//	stem.update.id         the update's ID (update, reply; reply events)
//	stem.update.name       the update's name (update, reply; reply events)
//	stem.update.created    false when the run had an update of the ID already (update)
//	stem.update.failed     the workflow replied with an error (reply events)
//
// An execution that ends errored, or stops with an error (terminated,
// restarted, its lease lost, a store write failed), a failed attempt, an
// update the store did not record (its run had ended) and a reply
// with an error (Update.Fail) have status Error and record the error.
//
// # Metrics
//
// The instruments, under the meter named ScopeName (a Prometheus exporter
// shows counters with the suffix _total and durations with _seconds):
//
//	stem.runs.started       counter    runs created, by stem.workflow
//	stem.runs.finished      counter    runs ended by an execution, by stem.workflow and stem.status (complete, errored)
//	stem.executions         counter    executions, by stem.workflow and stem.outcome
//	stem.step.duration      histogram  step attempts, in seconds, by stem.workflow, stem.step and stem.outcome (ok, retry, failed)
//	stem.step.retries       counter    failed attempts to be retried, by stem.workflow and stem.step
//	stem.lease.lost         counter    executions stopped because another worker took the run, by stem.workflow
//	stem.sealed.handbacks   counter    runs handed back because the engine's codec cannot open them, by stem.workflow and stem.codec.key_id (the key they are sealed with; "" when unnamed)
//	stem.store.duration     histogram  store calls, in seconds, by stem.store.op and stem.outcome (ok, error)
//	stem.claim.duration     histogram  the engine's claims of ready runs, in seconds, by stem.outcome (ok, error)
//	stem.queue.ready        gauge      runs ready and not yet claimed, by stem.queue (Observe)
//	stem.queue.oldest_ready gauge      how long the oldest ready run has waited, in seconds, by stem.queue (Observe)
//	stem.queue.running      gauge      runs executing, by stem.queue (Observe)
//	stem.queue.waiting      gauge      runs asleep or awaiting an event, by stem.queue (Observe)
//
// stem.step is the step's checkpoint key without an autoversion
// iteration's "#n" suffix, so a loop of steps is one series. A terminated
// run ends in the store, not in an execution, and is not counted by
// stem.runs.finished. stem.lease.lost counts only runtime.ErrLeaseLost: a
// run terminated or restarted by an operator also stops its execution,
// but on purpose, and is an execution with stem.outcome stopped.
//
// Durations are measured on the system clock, as spans are, whatever
// clock the engine was configured with.
package stemotel
