package stemotel

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stemflow/stem/runtime"
)

// The attribute keys (see the package doc).
const (
	keyWorkflow    = attribute.Key("stem.workflow")
	keyRunID       = attribute.Key("stem.run_id")
	keyRuns        = attribute.Key("stem.runs")
	keyParentRunID = attribute.Key("stem.parent_run_id")
	keyVersion     = attribute.Key("stem.workflow.version")
	keyRecoveries  = attribute.Key("stem.recoveries")
	keyExecution   = attribute.Key("stem.execution")
	keyOutcome     = attribute.Key("stem.outcome")
	keyStatus      = attribute.Key("stem.status")
	keyStep        = attribute.Key("stem.step")
	keyStepKey     = attribute.Key("stem.step.key")
	keyAttempt     = attribute.Key("stem.step.attempt")
	keyAsync       = attribute.Key("stem.step.async")
	keyRetry       = attribute.Key("stem.step.retry")
	keyRetryAt     = attribute.Key("stem.step.retry_at")
	keyWaitKind    = attribute.Key("stem.wait.kind")
	keyWaitTopics  = attribute.Key("stem.wait.topics")
	keyWaitUntil   = attribute.Key("stem.wait.until")
	keyStoreOp     = attribute.Key("stem.store.op")
	keyQueue       = attribute.Key("stem.queue")
	keyKeyID       = attribute.Key("stem.codec.key_id")

	keyUpdateID      = attribute.Key("stem.update.id")
	keyUpdateName    = attribute.Key("stem.update.name")
	keyUpdateCreated = attribute.Key("stem.update.created")
	keyUpdateFailed  = attribute.Key("stem.update.failed")
)

// maxCached bounds each cache of attribute sets. Workflow names, step
// keys and store methods are few, but a workflow that names its steps
// from data could make a cache grow without end; past the bound, sets
// are built for each use instead.
const maxCached = 4096

// cache holds values built once per key, up to maxCached of them.
type cache[K comparable, V any] struct {
	make func(K) V
	mu   sync.RWMutex
	m    map[K]V
}

// get returns k's value, building it on first use.
func (c *cache[K, V]) get(k K) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = c.make(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if have, ok := c.m[k]; ok {
		return have
	}
	if len(c.m) < maxCached {
		if c.m == nil {
			c.m = map[K]V{}
		}
		c.m[k] = v
	}
	return v
}

// workflowSets are what the hooks record for a workflow, built once.
type workflowSets struct {
	attr        attribute.KeyValue
	startName   string
	executeName string
	started     metric.MeasurementOption
	complete    metric.MeasurementOption // stem.runs.finished
	errored     metric.MeasurementOption // stem.runs.finished
	leaseLost   metric.MeasurementOption
	outcomes    map[runtime.Outcome]metric.MeasurementOption // stem.executions
}

// outcomes are the outcomes of an execution.
var outcomes = []runtime.Outcome{runtime.OutcomeComplete, runtime.OutcomeErrored, runtime.OutcomeParked,
	runtime.OutcomeContinued, runtime.OutcomePaused, runtime.OutcomeReleased, runtime.OutcomeStopped, runtime.OutcomeHeld}

func newWorkflowSets(name string) *workflowSets {
	w := keyWorkflow.String(name)
	only := metric.WithAttributeSet(attribute.NewSet(w))
	s := &workflowSets{
		attr:        w,
		startName:   "stem.start " + name,
		executeName: "stem.execute " + name,
		started:     only,
		leaseLost:   only,
		complete:    metric.WithAttributeSet(attribute.NewSet(w, keyStatus.String(string(runtime.StatusComplete)))),
		errored:     metric.WithAttributeSet(attribute.NewSet(w, keyStatus.String(string(runtime.StatusErrored)))),
		outcomes:    make(map[runtime.Outcome]metric.MeasurementOption, len(outcomes)),
	}
	for _, o := range outcomes {
		s.outcomes[o] = metric.WithAttributeSet(attribute.NewSet(w, keyOutcome.String(string(o))))
	}
	return s
}

// outcome returns the stem.executions set for o.
func (s *workflowSets) outcome(o runtime.Outcome) metric.MeasurementOption {
	if m, ok := s.outcomes[o]; ok {
		return m
	}
	return metric.WithAttributeSet(attribute.NewSet(s.attr, keyOutcome.String(string(o))))
}

// stepID names a step of a workflow for its sets: its key without an
// autoversion iteration's suffix.
type stepID struct{ workflow, step string }

// stepSets are what the attempt hook records for a step, built once.
type stepSets struct {
	spanName          string
	ok, retry, failed metric.MeasurementOption // stem.step.duration
	retries           metric.MeasurementOption // stem.step.retries
}

func newStepSets(id stepID) *stepSets {
	w, st := keyWorkflow.String(id.workflow), keyStep.String(id.step)
	return &stepSets{
		spanName: "stem.step " + id.step,
		ok:       metric.WithAttributeSet(attribute.NewSet(w, st, keyOutcome.String("ok"))),
		retry:    metric.WithAttributeSet(attribute.NewSet(w, st, keyOutcome.String("retry"))),
		failed:   metric.WithAttributeSet(attribute.NewSet(w, st, keyOutcome.String("failed"))),
		retries:  metric.WithAttributeSet(attribute.NewSet(w, st)),
	}
}

// opSets are what the store hook records for a store method, built once.
type opSets struct {
	spanName   string
	attr       attribute.KeyValue
	ok, failed metric.MeasurementOption
}

func newOpSets(op string) *opSets {
	a := keyStoreOp.String(op)
	return &opSets{
		spanName: "stem.store " + op,
		attr:     a,
		ok:       metric.WithAttributeSet(attribute.NewSet(a, keyOutcome.String("ok"))),
		failed:   metric.WithAttributeSet(attribute.NewSet(a, keyOutcome.String("error"))),
	}
}

// updateSets are what the update hooks record for an update name, built
// once.
type updateSets struct {
	attr                attribute.KeyValue
	sendName, replyName string
}

func newUpdateSets(name string) *updateSets {
	return &updateSets{
		attr:      keyUpdateName.String(name),
		sendName:  "stem.update " + name,
		replyName: "stem.update.reply " + name,
	}
}

// stepName returns a checkpoint key without an autoversion iteration's
// "#n" suffix (runtime.IterationKey): "pack@v1#3" gives "pack@v1".
func stepName(key string) string {
	for i := len(key) - 1; i > 0; i-- {
		c := key[i]
		switch {
		case c >= '0' && c <= '9':
			continue
		case c == '#' && i < len(key)-1:
			return key[:i]
		}
		break
	}
	return key
}
