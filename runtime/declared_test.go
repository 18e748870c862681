package runtime_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var errCardDeclined = errors.New("card declined")

// cardError is declared with a field a codec must keep sealed at rest.
type cardError struct{ PAN string }

func (e *cardError) Error() string { return "card rejected" }

func init() {
	runtime.DeclareError("runtime_test.card_declined", errCardDeclined)
	runtime.DeclareErrorType[*cardError]("runtime_test.card")
}

// A declared type's fields are sealed at rest with the message when the
// engine has a codec, and read back whole by an engine that holds the key.
func TestDeclaredErrorFieldsAreSealed(t *testing.T) {
	t.Parallel()
	store := setup(t).store
	e := codecEngine(t, store, codecOf(t, keyA))
	must(t, runtime.Register(e, "card", func(c *runtime.WorkflowContext, _ string) (string, error) {
		return runtime.Step(c, "charge@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
			return "", fmt.Errorf("%w: %w", errCardDeclined, &cardError{PAN: "4111-SECRET"})
		})
	}))
	start(t, e)
	_, err := runtime.Start[string, string](waitCtx(t), e, "card", "", runtime.WithID("c1"))
	must(t, err)
	_, err = result(t, e, "card", "c1")
	var ce *cardError
	if !errors.Is(err, errCardDeclined) || !errors.As(err, &ce) || ce.PAN != "4111-SECRET" {
		t.Fatalf("Result = %v: want it to match the declared value and type, with the field", err)
	}
	replay, err := store.LoadReplay(waitCtx(t), "c1")
	must(t, err)
	cps := replay.Checkpoints
	rec, err := store.GetRun(waitCtx(t), "c1")
	must(t, err)
	for what, info := range map[string]string{"checkpoint": fmt.Sprint(cps[0].Error), "run": fmt.Sprint(rec.Error)} {
		if strings.Contains(info, "SECRET") || strings.Contains(info, "runtime_test.card") {
			t.Errorf("the %s's stored error %s holds the field or the name in the clear", what, info)
		}
	}
	// Without the key the error says it is sealed, and still matches
	// nothing it cannot show.
	plain, err := runtime.New(runtime.Config{Store: store})
	must(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	_, err = mustGet[string](t, plain, "card", "c1").Result(waitCtx(t))
	if !errors.Is(err, runtime.ErrSealed) || errors.As(err, &ce) {
		t.Fatalf("Result without the key = %v, want ErrSealed and no declared type", err)
	}
}

// Declarations are checked when made: a name taken by another error, a
// value declared twice, a nil or incomparable value, an interface type
// and a malformed name each panic with a message that names the problem;
// the same declaration twice is fine.
func TestDeclareErrorRefusals(t *testing.T) {
	t.Parallel()
	runtime.DeclareError("runtime_test.card_declined", errCardDeclined) // the same again
	other := errors.New("other")
	type sliceErr []string
	for _, c := range []struct {
		name    string
		declare func()
		want    string
	}{
		{"name taken", func() { runtime.DeclareError("runtime_test.card_declined", other) }, `error name "runtime_test.card_declined" is declared twice`},
		{"value twice", func() { runtime.DeclareError("runtime_test.other_name", errCardDeclined) }, `is declared twice: as "runtime_test.card_declined" and as "runtime_test.other_name"`},
		{"type twice", func() { runtime.DeclareErrorType[*cardError]("runtime_test.card2") }, `*runtime_test.cardError is declared twice`},
		{"nil", func() { runtime.DeclareError("runtime_test.nil", nil) }, "the error value is nil"},
		{"interface", func() { runtime.DeclareErrorType[error]("runtime_test.iface") }, "is an interface"},
		{"empty name", func() { runtime.DeclareError("", other) }, "error name"},
		{"spaced name", func() { runtime.DeclareError("a b", other) }, `invalid character ' ' in error name "a b"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if p == nil || !strings.Contains(fmt.Sprint(p), c.want) {
					t.Fatalf("panic %v, want one saying %q", p, c.want)
				}
			}()
			c.declare()
		})
	}
}

// A declared failure a workflow passes on as its own result keeps its
// name, so its caller matches it too.
func TestDeclaredErrorPassedOnByWorkflow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	e, _ := f.engine(time.Minute, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "relay", func(c *runtime.WorkflowContext, _ string) (string, error) {
			_, err := runtime.Step(c, "fail@v1", runtime.StepOptions{}, func(runtime.StepContext) (string, error) {
				return "", fmt.Errorf("wrapped: %w", errCardDeclined)
			})
			return "", err
		}))
	})
	start(t, e)
	_, err := runtime.Start[string, string](waitCtx(t), e, "relay", "", runtime.WithID("r1"))
	must(t, err)
	_, err = result(t, e, "relay", "r1")
	var se *runtime.StepError
	if !errors.Is(err, errCardDeclined) || !errors.As(err, &se) || fmt.Sprint(se.Declared()) != "[runtime_test.card_declined]" || se.Error() != "wrapped: card declined" {
		t.Fatalf("Result = %v (%+v), want the declared value matched through the workflow's return", err, se)
	}
	if name, ok := runtime.DeclaredErrorName(err); !ok || name != "runtime_test.card_declined" {
		t.Fatalf("DeclaredErrorName = %q, %v", name, ok)
	}
}

// A failure recorded under a name this process does not declare (the code
// that declared it was removed) reads back as its text, matching nothing,
// and still names what it was.
func TestUndeclaredNameReadsAsText(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	store := setup(t).store
	_, err := store.CreateRuns(ctx, []storage.NewRun{{ID: "old", Workflow: "gone"}})
	must(t, err)
	claimed, err := store.Claim(ctx, storage.ClaimRequest{Owner: "w", Workflows: []string{"gone"}, Limit: 1, LeaseFor: time.Minute})
	must(t, err)
	must(t, store.Complete(ctx, storage.CompleteRequest{Lease: claimed[0].Lease, Status: storage.StatusErrored,
		Error: &storage.ErrorInfo{Message: "limit reached", Detail: `{"errors":[{"name":"removed.limit","fields":{"N":1}}]}`}}))
	e, err := runtime.New(runtime.Config{Store: store})
	must(t, err)
	t.Cleanup(func() { _ = e.Close() })
	info, err := e.Get(ctx, "old")
	must(t, err)
	var se *runtime.StepError
	if !errors.As(info.Err, &se) || se.Error() != "limit reached" || fmt.Sprint(se.Declared()) != "[removed.limit]" || errors.Is(info.Err, errCardDeclined) {
		t.Fatalf("Err = %v (%+v), want the text, the recorded name, and no match", info.Err, se)
	}
	if name, ok := runtime.DeclaredErrorName(info.Err); !ok || name != "removed.limit" {
		t.Fatalf("DeclaredErrorName = %q, %v; want the recorded name", name, ok)
	}
}

// A child's declared failure reaches its parent's call with its identity,
// and the parent passing it on hands it to its own caller.
func TestDeclaredErrorThroughChild(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var sawInParent error
	e, _ := f.engine(time.Minute, func(e *runtime.Engine) {
		must(t, runtime.Register(e, "kid", func(c *runtime.WorkflowContext, _ string) (string, error) {
			return "", &cardError{PAN: "4242"}
		}))
		must(t, runtime.Register(e, "parent", func(c *runtime.WorkflowContext, _ string) (string, error) {
			_, err := runtime.CallChild[string](c, "kid", "kid", "")
			sawInParent = err
			return "", fmt.Errorf("parent: %w", err)
		}))
	})
	start(t, e)
	_, err := runtime.Start[string, string](waitCtx(t), e, "parent", "", runtime.WithID("p"))
	must(t, err)
	_, err = result(t, e, "parent", "p")
	for what, err := range map[string]error{"the parent's call": sawInParent, "the parent's Result": err} {
		var ce *cardError
		if !errors.As(err, &ce) || ce.PAN != "4242" {
			t.Errorf("%s: %v, want the child's *cardError with its field", what, err)
		}
	}
}
