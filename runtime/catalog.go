package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/internal/jsonschema"
	"github.com/stemflow/stem/storage"
)

// RegisterOption configures one Register.
type RegisterOption func(*workflowDef)

// WorkflowVersion records the workflow's version (from its annotation's
// version=, default 1) in the store's catalog with its input and output
// shapes.
func WorkflowVersion(n int) RegisterOption {
	return func(d *workflowDef) { d.version = n }
}

// WorkflowTimeout gives the workflow's runs a deadline d after their start
// (the annotation's timeout=), unless a start sets one (WithTimeout,
// WithDeadline). Past it a run ends with ErrDeadline.
func WorkflowTimeout(d time.Duration) RegisterOption {
	return func(def *workflowDef) { def.timeout = d }
}

// WorkflowQueue makes name the workflow's default queue (the annotation's
// queue=): its runs are started there unless a start names another
// (OnQueue). The queue must be registered on the engine (RegisterQueue)
// before Run or the first start; the default is storage.DefaultQueue.
func WorkflowQueue(name string) RegisterOption {
	return func(def *workflowDef) { def.queue = name }
}

// WorkflowRetention keeps the workflow's finished runs for d after they end
// (the annotation's retention=), overriding Config.Retention; 0 keeps them
// forever. Every engine sharing the store reads it from the catalog.
func WorkflowRetention(d time.Duration) RegisterOption {
	return func(def *workflowDef) { def.retention = &d }
}

// eventDef is an event type registered with RegisterEvent.
type eventDef struct {
	topic string
	typ   reflect.Type
}

// RegisterEvent declares that payloads of topic are T: the engine records
// the topic with T's JSON Schema in the store's catalog when it runs, so
// tools that send events by hand (the operator command) can refuse a
// payload that would not decode. Generated code registers every annotated
// event. A topic registered again with another type is ErrInvalidArgument.
func RegisterEvent[T any](e *Engine, topic string) error {
	if err := validTopic(topic); err != nil {
		return err
	}
	t := reflect.TypeFor[T]()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if old, ok := e.events[topic]; ok && old.typ != t {
		return invalidArg("event topic %q is registered with payload %v, not %v", topic, old.typ, t)
	}
	e.events[topic] = eventDef{topic: topic, typ: t}
	return nil
}

// validTopic checks a topic a caller emits, sends, waits on or registers
// (storage.CheckTopic): an empty or malformed topic, and the reserved ones
// ("stem.", on which a child's outcome travels, so nobody can forge one),
// are ErrInvalidArgument.
func validTopic(topic string) error {
	return storage.CheckTopic(topic)
}

// recordCatalog records the engine's workflows and event types in the
// store, for tools that do not run them. A failure is logged: workers do
// not depend on the catalog.
func (e *Engine) recordCatalog(ctx context.Context) {
	e.mu.Lock()
	var c storage.Catalog
	now := e.clock.Now().UTC()
	for _, name := range e.names {
		d := e.workflows[name]
		in, errIn := jsonschema.For(d.inType)
		out, errOut := jsonschema.For(d.outType)
		if err := cmpErr(errIn, errOut); err != nil {
			e.log.Warn("stem: no schema for a workflow's input or output; tools will not check it", "workflow", name, "err", err)
		}
		c.Workflows = append(c.Workflows, storage.WorkflowType{
			Name: name, Version: d.version, InputSchema: in, OutputSchema: out, Worker: e.cfg.WorkerID, UpdatedAt: now,
			Queue: d.queue, Retention: d.retention, Timeout: d.timeout, Attributes: slices.Clone(d.attrs),
		})
	}
	topics := make([]string, 0, len(e.events))
	for t := range e.events {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for _, t := range topics {
		s, err := jsonschema.For(e.events[t].typ)
		if err != nil {
			e.log.Warn("stem: no schema for an event's payload; tools will not check it", "topic", t, "err", err)
		}
		c.Events = append(c.Events, storage.EventType{Topic: t, PayloadSchema: s, Worker: e.cfg.WorkerID, UpdatedAt: now})
	}
	c.Events = append(c.Events, e.updateSchemas(now)...)
	for _, q := range e.queues {
		c.Queues = append(c.Queues, storage.QueueType{Queue: q, Worker: e.cfg.WorkerID, UpdatedAt: now})
	}
	slices.SortFunc(c.Queues, func(a, b storage.QueueType) int { return strings.Compare(a.Name, b.Name) })
	e.mu.Unlock()
	if err := e.store.PutCatalog(ctx, c); err != nil {
		e.log.Error("stem: recording the catalog of workflows and events", "err", err)
	}
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Catalog returns the workflows and event types recorded in the store by
// the engines that share it, with their versions and JSON Schemas.
func (e *Engine) Catalog(ctx context.Context) (storage.Catalog, error) {
	if err := e.checkOpen(); err != nil {
		return storage.Catalog{}, err
	}
	return e.store.GetCatalog(ctx)
}

// StartJSON starts a run of the workflow named workflow with raw JSON input,
// for tools that do not have the workflow's Go types: the workflow must be
// registered with this engine or recorded in the store's catalog by one that
// runs it, and the input must match its input (checked against the Go type
// here, or against the recorded JSON Schema), else ErrUnknownWorkflow or
// ErrDecode saying what and where, with nothing written. id may be "" for a
// generated ID; an existing ID returns the existing run when it is of the
// same workflow; an ID WithID would refuse is ErrInvalidArgument.
//
// Of opts, OnQueue, WithPartition, WithPriority, WithStartAt, WithDelay,
// WithTimeout, WithDeadline, IfExists, IfEnded, WithSingleton,
// WithDebounce and WithAttributes apply; WithID is the id argument. A
// start its policy refuses is a *RefusedError (ErrStartRefused); one that
// joins a key's run returns that run. The policies where none is given are the
// workflow's when this engine registers it, else ExistingReturn and
// EndedReturn (the catalog does not record them). Without
// WithTimeout or WithDeadline the run gets the workflow's timeout=, from
// its registration here or else from the catalog, counted from its start,
// and it records the workflow's version from the same place; its search
// attributes are taken from the input as the workflow declares them
// there (WorkflowAttributes), WithAttributes over them.
func (e *Engine) StartJSON(ctx context.Context, workflow, id string, input json.RawMessage, opts ...StartOption) (RunInfo, error) {
	run, err := e.PrepareStartJSON(ctx, workflow, id, input, opts...)
	if err != nil {
		return RunInfo{}, err
	}
	res, err := e.create(ctx, []storage.NewRun{run})
	if err != nil {
		return RunInfo{}, err
	}
	if r := res[0]; r.Refused != "" {
		return RunInfo{}, &RefusedError{RunID: r.Run.ID, Status: r.Run.Status, Refusal: r.Refused}
	}
	return e.runInfo(res[0].Run), nil
}

// PrepareStartJSON checks a start as StartJSON does (the workflow known,
// the input matching its type, its search attributes, the queue and
// partition) and returns the run it would create, with its input encoded
// (sealed by Config.Codec), without creating it: for packages that start
// runs later (a schedule's ticks).
// id may be "": the run then has none yet.
func (e *Engine) PrepareStartJSON(ctx context.Context, workflow, id string, input json.RawMessage, opts ...StartOption) (storage.NewRun, error) {
	var o startOptions
	if err := e.checkOpen(); err != nil {
		return storage.NewRun{}, err
	}
	if id != "" {
		if err := validRunID(id); err != nil {
			return storage.NewRun{}, err
		}
	}
	what := "input of " + workflow
	if err := e.checkJSON(what, input); err != nil {
		return storage.NewRun{}, err
	}
	version := 0 // the registered newest: StartDefaults
	var recorded *storage.WorkflowType
	policies := &workflowDef{} // the workflow's start policies, when registered here
	if def, err := e.registered(workflow); err == nil {
		policies = def
		if err := decodeJSON(what, input, e.cfg.MaxPayloadBytes, reflect.New(def.inType).Interface()); err != nil {
			return storage.NewRun{}, err
		}
	} else {
		c, err := e.store.GetCatalog(ctx)
		if err != nil {
			return storage.NewRun{}, err
		}
		i := slices.IndexFunc(c.Workflows, func(w storage.WorkflowType) bool { return w.Name == workflow })
		if i < 0 {
			names := make([]string, len(c.Workflows))
			for i, w := range c.Workflows {
				names[i] = w.Name
			}
			return storage.NewRun{}, fmt.Errorf("%w: %q: no engine that shares this store serves it (known: %s)%s", ErrUnknownWorkflow, workflow, listOrNone(names), didYouMean(workflow, names))
		}
		if err := checkSchema(what, c.Workflows[i].InputSchema, input); err != nil {
			return storage.NewRun{}, err
		}
		recorded = &c.Workflows[i]
		version = recorded.Version
	}
	in, err := e.payloads.encodeRaw(what, input)
	if err != nil {
		return storage.NewRun{}, err
	}
	run := storage.NewRun{ID: id, Workflow: workflow, Input: in, Version: version}
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return storage.NewRun{}, o.err
	}
	decls := policies.attrs
	if recorded != nil {
		decls = recorded.Attributes
	}
	if run.Attributes, err = startAttrs(workflow, decls, input, o.attrs); err != nil {
		return storage.NewRun{}, err
	}
	o.resolve(e.clock.Now())
	run.Queue, run.Partition, run.Priority, run.Key = o.queue, o.partition, o.priority, o.key
	if err := e.startPolicies(policies, &run, "", "", &o); err != nil {
		return storage.NewRun{}, err
	}
	if !o.at.IsZero() {
		run.StartAt = &o.at
	}
	if !o.deadline.IsZero() {
		run.Deadline = &o.deadline
	}
	if recorded != nil {
		catalogDefaults(&run, *recorded, e.clock.Now())
	} else {
		e.StartDefaults(&run)
	}
	if err := e.place(ctx, &run, &queueCatalog{}); err != nil {
		return storage.NewRun{}, err
	}
	return run, nil
}

// SendEventJSON is SendEvent for tools that have the payload as JSON and not
// its Go type: the topic must be registered with this engine or recorded in
// the store's catalog, and the payload must match its type, else
// ErrInvalidArgument or ErrDecode, with nothing written.
func (e *Engine) SendEventJSON(ctx context.Context, runID, topic string, payload json.RawMessage) error {
	if err := e.checkEventJSON(ctx, topic, payload); err != nil {
		return err
	}
	b, err := e.payloads.encode("payload of event "+topic, payload)
	if err != nil {
		return err
	}
	return e.sendEvent(ctx, runID, topic, b)
}

// EmitJSON is Emit for tools that have the payload as JSON; the topic and
// payload are checked as by SendEventJSON.
func (e *Engine) EmitJSON(ctx context.Context, topic string, payload json.RawMessage) (int, error) {
	if err := e.checkEventJSON(ctx, topic, payload); err != nil {
		return 0, err
	}
	b, err := e.payloads.encode("payload of event "+topic, payload)
	if err != nil {
		return 0, err
	}
	return e.emit(ctx, topic, b)
}

func (e *Engine) checkEventJSON(ctx context.Context, topic string, payload json.RawMessage) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	if err := validTopic(topic); err != nil {
		return err
	}
	what := "payload of event " + topic
	if err := e.checkJSON(what, payload); err != nil {
		return err
	}
	t, err := e.eventType(ctx, topic)
	if err != nil {
		return err
	}
	switch {
	case t.typ != nil:
		return decodeJSON(what, payload, e.cfg.MaxPayloadBytes, reflect.New(t.typ).Interface())
	case t.recorded:
		return checkSchema(what, t.schema, payload)
	}
	return invalidArg("event topic %q: no engine that shares this store awaits it (known: %s)", topic, listOrNone(t.known))
}

// topicType is what an engine knows of an event topic's payloads.
type topicType struct {
	// typ is the Go type this engine registers the topic with, or nil.
	typ reflect.Type
	// recorded says the store's catalog records the topic (read only when
	// typ is nil), with schema, its payload's JSON Schema (nil when the
	// recording engine could not derive one); known lists the topics the
	// catalog records.
	recorded bool
	schema   json.RawMessage
	known    []string
}

// eventType looks topic up in the engine's registrations, then in the
// store's catalog.
func (e *Engine) eventType(ctx context.Context, topic string) (topicType, error) {
	e.mu.Lock()
	def, ok := e.events[topic]
	e.mu.Unlock()
	if ok {
		return topicType{typ: def.typ}, nil
	}
	c, err := e.store.GetCatalog(ctx)
	if err != nil {
		return topicType{}, err
	}
	var t topicType
	for _, ev := range c.Events {
		t.known = append(t.known, ev.Topic)
		if ev.Topic == topic {
			t.recorded, t.schema = true, ev.PayloadSchema
		}
	}
	return t, nil
}

// checkJSON refuses a payload over the size limit or that is not JSON.
func (e *Engine) checkJSON(what string, raw json.RawMessage) error {
	if len(raw) > e.cfg.MaxPayloadBytes {
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrPayloadTooLarge, what, len(raw), e.cfg.MaxPayloadBytes)
	}
	if !json.Valid(raw) {
		return fmt.Errorf("%w: %s is not JSON", ErrDecode, what)
	}
	return nil
}

// checkSchema validates a payload against a recorded schema; a type
// recorded without one is not checked.
func checkSchema(what string, schema, raw json.RawMessage) error {
	if len(schema) == 0 {
		return nil
	}
	if err := jsonschema.Validate(schema, raw); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrDecode, what, err)
	}
	return nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none recorded"
	}
	return strings.Join(names, ", ")
}
