package stemtest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stemflow/stem/runtime"
)

// MockWorkflow puts fn in place of the workflow named name on env's
// engine, and on every engine env starts later (see OnEngine): when the
// engine registers the workflow, with runtime.OverrideWorkflow; when it
// does not (a child that lives in another package or service), by
// registering fn under name as a stand-in, with opts (the workflow's
// runtime.WorkflowVersion, say). Either way fn runs as the workflow's runs
// do: a parent's child call starts a real child run on the engine, which
// calls fn, and the parent gets fn's output or error checkpointed as a
// child's, so the parent's replays do not call fn again. fn is a workflow
// function: it may sleep or wait on its context, and it runs again from
// the top whenever its own run is replayed. A nil fn gives a registered
// workflow its own function back. Generated mocks call it with the
// workflow's types.
func MockWorkflow[In, Out any](env *Env, name string, fn func(ctx *runtime.WorkflowContext, in In) (Out, error), opts ...runtime.RegisterOption) {
	env.t.Helper()
	env.OnEngine(func(e *runtime.Engine) error {
		err := runtime.OverrideWorkflow(e, name, fn)
		if errors.Is(err, runtime.ErrUnknownWorkflow) && fn != nil {
			err = runtime.Register(e, name, fn, opts...)
		}
		if err != nil {
			return fmt.Errorf("mocking workflow %s: %w", name, err)
		}
		return nil
	})
}

// ExpectCount reports an error on t, naming the mock what and listing
// calls, unless calls holds n of them; it reports whether it does.
// Generated mocks' ExpectCount call it.
func ExpectCount[T any](t testing.TB, what string, calls []T, n int) bool {
	t.Helper()
	if len(calls) == n {
		return true
	}
	t.Errorf("%s: called %s, want %s%s", what, times(len(calls)), times(n), listCalls(calls))
	return false
}

// ExpectCall reports an error on t, naming the mock what, unless call i
// (from 0, in the order the calls began) exists and equals want
// (reflect.DeepEqual); it reports whether it does. Generated mocks'
// ExpectCall call it.
func ExpectCall[T any](t testing.TB, what string, calls []T, i int, want T) bool {
	t.Helper()
	if i < 0 || i >= len(calls) {
		t.Errorf("%s: no call #%d to compare with %+v: called %s%s", what, i, want, times(len(calls)), listCalls(calls))
		return false
	}
	if reflect.DeepEqual(calls[i], want) {
		return true
	}
	t.Errorf("%s: call #%d:\n\tgot  %+v\n\twant %+v", what, i, calls[i], want)
	return false
}

// ExpectCalledWith reports an error on t, naming the mock what and
// listing calls, unless one of calls equals want (reflect.DeepEqual); it
// reports whether one does. Generated mocks' ExpectCalledWith call it.
func ExpectCalledWith[T any](t testing.TB, what string, calls []T, want T) bool {
	t.Helper()
	for _, c := range calls {
		if reflect.DeepEqual(c, want) {
			return true
		}
	}
	t.Errorf("%s: no call with %+v: called %s%s", what, want, times(len(calls)), listCalls(calls))
	return false
}

// times says n times in words.
func times(n int) string {
	switch n {
	case 0:
		return "never"
	case 1:
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// listCalls lists calls, one a line, numbered from 0, or "".
func listCalls[T any](calls []T) string {
	var b strings.Builder
	for i, c := range calls {
		fmt.Fprintf(&b, "\n\t#%d %+v", i, c)
	}
	return b.String()
}

// MockStep makes env's engine, and every engine env starts later (see
// OnEngine), call fn instead of the function of the step keyed key (its
// name@vN), with runtime.OverrideStep; a nil fn gives the step its own
// function back. Generated mocks call it with fn typed as the step's
// function.
func MockStep(env *Env, key string, fn any) {
	env.t.Helper()
	env.OnEngine(func(e *runtime.Engine) error {
		runtime.OverrideStep(e, key, fn)
		return nil
	})
}
