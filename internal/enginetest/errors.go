package enginetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

var errorScenarios = []scenario{
	{"DeclaredErrorsKeepIdentity", testDeclaredErrorsKeepIdentity},
	{"DeclaredErrorsAcrossCrash", testDeclaredErrorsAcrossCrash},
}

// The errors the scenarios declare, as a user's package would with
// //stem:error.
var errInsufficientFunds = errors.New("insufficient funds")

// limitError is a declared error type with pointer receivers, wrapping
// the declared sentinel.
type limitError struct {
	Account string
	Limit   int
}

func (e *limitError) Error() string {
	return fmt.Sprintf("account %s is over its limit of %d", e.Account, e.Limit)
}
func (e *limitError) Unwrap() error { return errInsufficientFunds }

// reviewError is a declared error type with a value receiver.
type reviewError struct{ Reason string }

func (e reviewError) Error() string { return "held for review: " + e.Reason }

func init() {
	runtime.DeclareError("enginetest.insufficient_funds", errInsufficientFunds)
	runtime.DeclareErrorType[*limitError]("enginetest.limit")
	runtime.DeclareErrorType[reviewError]("enginetest.review")
}

// errorChecks records what each pass through the workflow saw of its
// steps' errors: live the first time, replayed after a park or a crash.
type errorChecks struct {
	mu     sync.Mutex
	passes []string
}

func (c *errorChecks) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.passes = append(c.passes, s)
}

func (c *errorChecks) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.passes...)
}

// seeErrors describes what errors.Is and errors.As find in a step's
// failure, in one line a scenario compares.
func seeErrors(err error) string {
	var le *limitError
	var re reviewError
	var se *runtime.StepError
	limit, review := "-", "-"
	if errors.As(err, &le) {
		limit = fmt.Sprintf("%s/%d", le.Account, le.Limit)
	}
	if errors.As(err, &re) {
		review = re.Reason
	}
	return fmt.Sprintf("insufficient=%v limit=%s review=%s permanent=%v step-error=%v text=%q",
		errors.Is(err, errInsufficientFunds), limit, review, runtime.IsPermanent(err), errors.As(err, &se), err)
}

// The lines seeErrors gives for the transfer's three failures and its
// result, wherever they are read.
const (
	seeCharge = `insufficient=true limit=A-1/100 review=- permanent=false step-error=true text="charge: account A-1 is over its limit of 100"`
	seeReview = `insufficient=false limit=- review=fraud permanent=true step-error=true text="held for review: fraud"`
	seePlain  = `insufficient=false limit=- review=- permanent=false step-error=true text="plain failure"`
	seeResult = `insufficient=true limit=A-1/100 review=fraud permanent=true step-error=true text="transfer: charge: account A-1 is over its limit of 100\nheld for review: fraud"`
)

// registerTransfer registers, as "errs.transfer", a workflow whose steps
// fail with declared errors (a wrapped type that wraps a sentinel, a
// permanent value-receiver type) and an undeclared one, checks what it
// sees of each, parks, and returns the declared failures joined.
func registerTransfer(f *fixture, e *runtime.Engine, checks *errorChecks, attempts *sideEffects) {
	f.must(runtime.Register(e, "errs.transfer", func(c *runtime.WorkflowContext, _ int) (int, error) {
		charge := runtime.Do(c, "charge@v1", runtime.StepOptions{}, func(sc runtime.StepContext) error {
			attempts.add(sc.RunID(), "charge")
			return fmt.Errorf("charge: %w", &limitError{Account: "A-1", Limit: 100})
		})
		review := runtime.Do(c, "review@v1", runtime.StepOptions{Retries: 5, Backoff: time.Millisecond}, func(sc runtime.StepContext) error {
			attempts.add(sc.RunID(), "review")
			return runtime.Permanent(reviewError{Reason: "fraud"})
		})
		plain := runtime.Do(c, "plain@v1", runtime.StepOptions{}, func(sc runtime.StepContext) error {
			attempts.add(sc.RunID(), "plain")
			return errors.New("plain failure")
		})
		checks.add(seeErrors(charge) + "\n" + seeErrors(review) + "\n" + seeErrors(plain))
		if err := c.Sleep("settle", 5*time.Millisecond); err != nil {
			return 0, err
		}
		checks.add(seeErrors(charge) + "\n" + seeErrors(review) + "\n" + seeErrors(plain))
		return 0, fmt.Errorf("transfer: %w", errors.Join(charge, review))
	}))
}

// checkTransfer checks every pass of the workflow saw its steps' errors
// with their identity, each step function ran once (the permanent one was
// not retried), and the run's result keeps the identity of both declared
// failures when read by reader.
func checkTransfer(f *fixture, reader *runtime.Engine, id string, checks *errorChecks, attempts *sideEffects, where string) {
	f.t.Helper()
	ended := f.waitStatus(reader, id, runtime.StatusErrored)
	want := seeCharge + "\n" + seeReview + "\n" + seePlain
	passes := checks.all()
	if len(passes) < 2 {
		f.t.Fatalf("%s: the workflow checked its errors %d times, want at least 2 (before and after its park); the run ended with %v", where, len(passes), ended.Err)
	}
	for i, p := range passes {
		if p != want {
			f.t.Errorf("%s: pass %d of the workflow saw its steps' errors as\n%s\nwant\n%s", where, i+1, p, want)
		}
	}
	if got := attempts.of(id); got["charge"] != 1 || got["review"] != 1 || got["plain"] != 1 {
		f.t.Errorf("%s: step functions ran %v, want each once: a replay reads failures back, and a permanent one is not retried", where, got)
	}
	run, err := runtime.Get[int](f.ctx, reader, "errs.transfer", id)
	f.must(err)
	_, err = run.Result(f.ctx)
	if got := seeErrors(err); got != seeResult {
		f.t.Errorf("%s: Result's error is\n%s\nwant\n%s", where, got, seeResult)
	}
	var se *runtime.StepError
	if errors.As(err, &se) {
		if got := fmt.Sprint(se.Declared()); got != "[enginetest.limit enginetest.insufficient_funds enginetest.review]" {
			f.t.Errorf("%s: the result records declared errors %s", where, got)
		}
	}
	info := f.info(reader, id)
	if got := seeErrors(info.Err); got != seeResult {
		f.t.Errorf("%s: RunInfo.Err is\n%s\nwant\n%s", where, got, seeResult)
	}
}

// testDeclaredErrorsKeepIdentity: declared errors match errors.Is and
// errors.As in the workflow the first time, after its park, from Result,
// and read by an engine that registers no workflow; IsPermanent holds
// after a round trip, and an undeclared error keeps its text.
func testDeclaredErrorsKeepIdentity(f *fixture) {
	var checks errorChecks
	var attempts sideEffects
	e := f.engine(config{}, func(e *runtime.Engine) { registerTransfer(f, e, &checks, &attempts) })
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "errs.transfer", 0, runtime.WithID("t1"))
	f.must(err)
	checkTransfer(f, e, "t1", &checks, &attempts, "one engine")
	client := f.engine(config{}, func(*runtime.Engine) {})
	checkTransfer(f, client, "t1", &checks, &attempts, "an engine with no workflows")
}

// testDeclaredErrorsAcrossCrash: a worker dies right after each write of
// the transfer in turn; the worker that takes the run over reads every
// failure back with its identity, and no step function runs twice.
func testDeclaredErrorsAcrossCrash(f *fixture) {
	for after := int32(1); after <= 4; after++ {
		var checks errorChecks
		var attempts sideEffects
		id := fmt.Sprintf("crash-%d", after)
		dying := &writeDyingStore{dyingStore: dyingStore{Store: f.store}, after: after}
		a := f.engine(config{store: dying, lease: 300 * time.Millisecond}, func(e *runtime.Engine) { registerTransfer(f, e, &checks, &attempts) })
		stopA := f.start(a)
		_, err := runtime.Start[int, int](f.ctx, a, "errs.transfer", 0, runtime.WithID(id))
		f.must(err)
		f.eventually(fmt.Sprintf("worker A dies after write %d", after), func() bool {
			rec, err := f.store.GetRun(f.ctx, id)
			return dying.dead.Load() || err == nil && rec.Status == storage.StatusErrored
		})
		stopA()
		b := f.engine(config{lease: 300 * time.Millisecond}, func(e *runtime.Engine) { registerTransfer(f, e, &checks, &attempts) })
		stopB := f.start(b)
		checkTransfer(f, b, id, &checks, &attempts, fmt.Sprintf("worker A died after write %d", after))
		stopB() // the next round's run is its own workers'

	}
}
