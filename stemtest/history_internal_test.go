package stemtest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// order is the input of the workflows the history tests record and
// replay; stock the result of their reserve step, in two shapes.
type (
	order     struct{ Qty int }
	stock     struct{ Held int }
	stockText struct{ Held string }
	approved  struct{ By string }
)

// historyCode is one build of the recorded workflow.
type historyCode struct {
	insert   bool // a step inserted before the approval
	heldText bool // the reserve step's result type changed
	byNumber bool // the approval event's field made a number
}

func registerHistory(code historyCode) func(e *runtime.Engine) error {
	return func(e *runtime.Engine) error {
		return runtime.Register(e, "shop.checkout", func(c *runtime.WorkflowContext, in order) (int, error) {
			held := in.Qty
			if code.heldText {
				s, err := runtime.Step(c, "reserve@v1", runtime.StepOptions{}, func(runtime.StepContext) (stockText, error) { return stockText{}, nil })
				if err != nil {
					return 0, err
				}
				_ = s
			} else {
				s, err := runtime.Step(c, "reserve@v1", runtime.StepOptions{}, func(runtime.StepContext) (stock, error) { return stock{Held: in.Qty}, nil })
				if err != nil {
					return 0, err
				}
				held = s.Held
			}
			if code.insert {
				if err := runtime.Do(c, "audit@v1", runtime.StepOptions{}, func(runtime.StepContext) error { return nil }); err != nil {
					return 0, err
				}
			}
			if code.byNumber {
				if _, err := runtime.WaitForEvent[struct{ By int }](c, "approval", "shop.approved", 0); err != nil {
					return 0, err
				}
			} else if _, err := runtime.WaitForEvent[approved](c, "approval", "shop.approved", 0); err != nil {
				return 0, err
			}
			return runtime.Step(c, "charge@v1", runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return held * 3, nil })
		})
	}
}

// recordHistory runs the workflow to its end on a fresh store and
// exports its history to a file in dir.
func recordHistory(t *testing.T, dir string) string {
	t.Helper()
	ctx := t.Context()
	e, err := runtime.New(runtime.Config{Store: memstore.New(memstore.Options{}), PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := registerHistory(historyCode{})(e); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(runCtx) }()
	defer func() { stop(); <-done; e.Close() }()
	run, err := runtime.Start[order, int](ctx, e, "shop.checkout", order{Qty: 4}, runtime.WithID("o-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SendEvent(ctx, "o-1", "shop.approved", approved{By: "ann"}); err != nil {
		t.Fatal(err)
	}
	if got, err := run.Result(ctx); err != nil || got != 12 {
		t.Fatalf("recorded run = %d, %v; want 12", got, err)
	}
	h, err := e.ExportHistory(ctx, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "o-1.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestReplayHistories: a run's exported history replays against the code
// that recorded it, and fails against each change that would not continue
// it, saying the real cause.
func TestReplayHistories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := recordHistory(t, dir)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"format": "stem.history/1"`, `"key": "reserve@v1"`, `"Held": 4`, `"key": "approval"`, `"By": "ann"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the history file lacks %s:\n%s", want, b)
		}
	}
	ReplayHistories(t, registerHistory(historyCode{}), filepath.Join(dir, "*.json"))

	for name, c := range map[string]struct {
		code historyCode
		want string
	}{
		"a step inserted":       {historyCode{insert: true}, "the code calls audit@v1, which the run did not record, where the run recorded approval"},
		"a result type changed": {historyCode{heldText: true}, "the checkpoint of reserve@v1, recorded by an earlier build, no longer decodes"},
		"an event changed":      {historyCode{byNumber: true}, "the event payload of approval, taken by an earlier execution, no longer decodes"},
	} {
		err := replayHistoryFile(t.Context(), registerHistory(c.code), file, options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: replay error %v, want it to say %q", name, err, c.want)
		}
	}
}

// TestReadHistoryRefusesBadFiles: a file that is not a run history, or is
// of another format, is refused saying so.
func TestReadHistoryRefusesBadFiles(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ text, want string }{
		"not JSON":       {`{"format":`, "payload does not decode"},
		"another format": {`{"format":"stem.history/9","run":"r","workflow":"w","execution":1,"status":"complete","input":1,"calls":[]}`, `format "stem.history/9"`},
		"unknown field":  {`{"format":"stem.history/1","run":"r","workflow":"w","execution":1,"status":"complete","input":1,"calls":[],"extra":1}`, `unknown field "extra"`},
		"a bad status":   {`{"format":"stem.history/1","run":"r","workflow":"w","execution":1,"status":"done","input":1,"calls":[]}`, `unknown status "done"`},
		"a bad kind":     {`{"format":"stem.history/1","run":"r","workflow":"w","execution":1,"status":"complete","input":1,"calls":[{"key":"a","kind":"nap"}]}`, `unknown kind "nap"`},
	} {
		_, err := runtime.ReadHistory(strings.NewReader(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}
