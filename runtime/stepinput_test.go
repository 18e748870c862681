package runtime_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// A step's input (StepOptions.Input) is recorded with its checkpoint,
// sealed by the codec as outputs are, and listed opened: for a step that
// succeeds, fails for good, or runs as a future. A step given none records
// none, and an input over the payload limit is not recorded, with a note
// saying why, while the step runs all the same.
func TestStepInputIsRecorded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	codec, err := runtime.NewAESGCMCodec([]byte("0123456789abcdef0123456789abcdef"))
	must(t, err)
	e, err := runtime.New(runtime.Config{Store: f.store, Codec: codec, MaxPayloadBytes: 1024, PollInterval: 5 * time.Millisecond, ShutdownGrace: 50 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	type order struct {
		Item string `json:"item"`
		Qty  int    `json:"qty"`
	}
	must(t, runtime.Register(e, "inputs", func(c *runtime.WorkflowContext, in string) (string, error) {
		if _, err := runtime.Step(c, "one@v1", runtime.StepOptions{Input: order{"lamp", 2}}, func(runtime.StepContext) (int, error) { return 1, nil }); err != nil {
			return "", err
		}
		if err := runtime.Do(c, "none@v1", runtime.StepOptions{}, func(runtime.StepContext) error { return nil }); err != nil {
			return "", err
		}
		big := strings.Repeat("x", 2000)
		if _, err := runtime.Step(c, "big@v1", runtime.StepOptions{Input: big}, func(runtime.StepContext) (int, error) { return len(big), nil }); err != nil {
			return "", err
		}
		fut := runtime.StepAsync(c, "async@v1", runtime.StepOptions{Input: []any{in, 7}}, func(runtime.StepContext) (string, error) { return in, nil })
		if _, err := fut.Await(); err != nil {
			return "", err
		}
		_, err := runtime.Step(c, "fail@v1", runtime.StepOptions{Input: "secret-input"}, func(runtime.StepContext) (int, error) {
			return 0, runtime.Permanent(errors.New("refused"))
		})
		return "", err
	}))
	start(t, e)
	ctx := waitCtx(t)
	_, err = runtime.Start[string, string](ctx, e, "inputs", "hello", runtime.WithID("in-1"))
	must(t, err)
	eventually(t, "the run errored", func() bool { return status(t, e, "in-1") == runtime.StatusErrored })

	steps, err := e.ListSteps(ctx, "in-1", 0)
	must(t, err)
	got := map[string]runtime.StepInfo{}
	for _, s := range steps {
		got[s.Key] = s
		if s.OpenErr != nil {
			t.Errorf("step %s: %v", s.Key, s.OpenErr)
		}
	}
	for key, want := range map[string]string{
		"one@v1": `{"item":"lamp","qty":2}`, "none@v1": ``, "big@v1": ``, "async@v1": `["hello",7]`, "fail@v1": `"secret-input"`,
	} {
		if s := got[key]; string(s.Input) != want {
			t.Errorf("step %s: Input %s, want %q", key, s.Input, want)
		}
	}
	if s := got["big@v1"]; s.Status != runtime.StepComplete || !strings.Contains(s.InputNote, "not recorded") || !strings.Contains(s.InputNote, "2002 bytes, limit 1024") {
		t.Errorf("step big@v1: status %s, note %q; want complete, with a note that its input is over the limit", s.Status, s.InputNote)
	}
	if s := got["fail@v1"]; s.Status != runtime.StepFailed {
		t.Errorf("step fail@v1 is %s, want failed", s.Status)
	}

	// At rest the inputs are sealed; an engine without the key lists the
	// steps all the same and says what it cannot open.
	h, err := f.store.ListSteps(ctx, storage.StepsQuery{RunID: "in-1"})
	must(t, err)
	for _, s := range h.Steps {
		if strings.Contains(string(s.Input), "lamp") || strings.Contains(string(s.Input), "secret-input") || strings.Contains(string(s.Input), "limit") {
			t.Errorf("step %s's input is stored in the clear: %q", s.Key, s.Input)
		}
	}
	blind, err := runtime.New(runtime.Config{Store: f.store})
	must(t, err)
	t.Cleanup(func() { blind.Close() })
	steps, err = blind.ListSteps(ctx, "in-1", 0)
	must(t, err)
	for _, s := range steps {
		if s.Key == "one@v1" && (s.Input != nil || !errors.Is(s.OpenErr, runtime.ErrSealed)) {
			t.Errorf("without the key, step one@v1: Input %s, OpenErr %v; want none, and ErrSealed", s.Input, s.OpenErr)
		}
	}
}
