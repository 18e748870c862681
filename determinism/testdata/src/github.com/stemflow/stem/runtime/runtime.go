// Package runtime is a stand-in for Stem's runtime with the few names the
// analyzer's test packages use: the analyzer knows the runtime by its
// import path only.
package runtime

import (
	"context"
	"time"
)

// StepContext is what a step function receives.
type StepContext interface {
	context.Context
	RunID() string
}

// WorkflowContext is what a workflow function receives.
type WorkflowContext struct{}

// Sleep suspends the run durably.
func (c *WorkflowContext) Sleep(name string, d time.Duration) error { return nil }

// SleepUntil suspends the run durably until t.
func (c *WorkflowContext) SleepUntil(name string, t time.Time) error { return nil }

// StepOptions is a step's policy.
type StepOptions struct{ Retries int }

// Future is a step's result to come.
type Future[T any] struct{ v T }

// Await waits for the future.
func (f *Future[T]) Await() (T, error) { return f.v, nil }

// Step runs fn as a checkpointed step.
func Step[T any](c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) (T, error)) (T, error) {
	return fn(nil)
}

// Do runs fn as a checkpointed step without a result.
func Do(c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) error) error {
	return fn(nil)
}

// StepAsync starts fn as a step.
func StepAsync[T any](c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) (T, error)) *Future[T] {
	v, _ := fn(nil)
	return &Future[T]{v}
}

// DoAsync starts fn as a step without a result.
func DoAsync(c *WorkflowContext, key string, opts StepOptions, fn func(sc StepContext) error) *Future[struct{}] {
	fn(nil)
	return &Future[struct{}]{}
}

// Select returns the first future ready.
func Select(c *WorkflowContext, name string, fs ...any) (int, error) { return 0, nil }
