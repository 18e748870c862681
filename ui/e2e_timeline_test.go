package ui_test

// The run page's timeline in a real browser (see e2etest_helpers_test.go
// for the harness): a run with parallel step futures, a retried step, a
// select between an event and a timer, and a child, watched live from its
// wait to its end.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/ui"
)

// registerTrip registers the trip workflow on f's engine: two steps as
// futures side by side (flights, hotel), a payment that fails twice
// before it succeeds, a select between the "trip.confirmed" event and an
// hour's timer, then the visa child. Each step records its input.
func registerTrip(f *e2eFixture) {
	t := f.t
	t.Helper()
	must(t, runtime.RegisterEvent[string](f.e, "trip.confirmed"))
	must(t, runtime.Register(f.e, "visa", func(c *runtime.WorkflowContext, dest string) (string, error) {
		return runtime.Step(c, "apply@v1", runtime.StepOptions{Input: dest}, func(runtime.StepContext) (string, error) {
			time.Sleep(120 * time.Millisecond)
			return "visa for " + dest, nil
		})
	}))
	must(t, runtime.Register(f.e, "trip", func(c *runtime.WorkflowContext, dest string) (string, error) {
		flights := runtime.StepAsync(c, "flights@v1", runtime.StepOptions{Input: dest}, func(runtime.StepContext) (string, error) {
			time.Sleep(150 * time.Millisecond)
			return "FL-" + dest, nil
		})
		hotel := runtime.StepAsync(c, "hotel@v1", runtime.StepOptions{Input: []any{dest, 3}}, func(runtime.StepContext) (string, error) {
			time.Sleep(250 * time.Millisecond)
			return "HO-" + dest, nil
		})
		if err := runtime.All(c, flights, hotel); err != nil {
			return "", err
		}
		if _, err := runtime.Step(c, "pay@v1", runtime.StepOptions{Retries: 2, Backoff: 80 * time.Millisecond, Jitter: runtime.NoJitter, Input: map[string]int{"cents": 12000}},
			func(sc runtime.StepContext) (string, error) {
				time.Sleep(20 * time.Millisecond)
				if sc.Attempt() < 3 {
					return "", errors.New("card declined")
				}
				return "paid", nil
			}); err != nil {
			return "", err
		}
		confirmed := runtime.OnEvent[string](c, "confirmed", "trip.confirmed")
		giveUp := c.Timer("give-up", time.Hour)
		if _, err := runtime.Select(c, "confirmed-or-not", confirmed, giveUp); err != nil {
			return "", err
		}
		by, err := confirmed.Await()
		if err != nil {
			return "", err
		}
		visa, err := runtime.CallChild[string](c, "visa", "visa", dest)
		if err != nil {
			return "", err
		}
		return visa + ", confirmed by " + by, nil
	}))
}

// The timeline draws the futures in lanes side by side, the payment's
// three attempts with the failed ones marked, the timer pending while the
// run waits; once the event is sent, without a reload, the select's
// winner, the timer lost, and the child's bar with its duration.
func TestTimelineInBrowser(t *testing.T) {
	browser := e2eBrowser(t)
	f := newE2EFixture(t, ui.Options{})
	registerTrip(f)
	f.start("trip", "trip-1", "lisbon")
	f.waitStatus("trip-1", runtime.StatusWaiting)
	p := e2eTab(t, browser, f)

	p.open("runs/trip-1")
	p.until("the timeline", `document.querySelector('#timeline svg.tl-lanes') !== null`)
	item := func(key string) string { return fmt.Sprintf(`#timeline svg.tl-item[data-call=%s]`, jsString(key)) }

	// The futures ran side by side: two lanes.
	flights, hotel := p.attrs(item("flights@v1"), "data-lane"), p.attrs(item("hotel@v1"), "data-lane")
	if len(flights) != 1 || len(hotel) != 1 || flights[0] == hotel[0] {
		t.Fatalf("flights@v1 is in lane %v and hotel@v1 in lane %v: want one each, not the same", flights, hotel)
	}
	for _, key := range []string{"flights@v1", "hotel@v1", "pay@v1"} {
		if took := p.attrs(item(key), "data-took"); len(took) != 1 || took[0] == "" {
			t.Errorf("%s's bar has no duration: %v", key, took)
		}
	}
	// The payment: three attempts, the first two failed, the backoffs
	// between them drawn.
	if got := p.attrs(item("pay@v1")+" rect[data-attempt]", "data-attempt"); strings.Join(got, ",") != "1,2,3" {
		t.Fatalf("pay@v1's bar shows attempts %v, want 1,2,3", got)
	}
	if n := p.count(item("pay@v1") + " rect.tl-attempt.failed"); n != 2 {
		t.Errorf("pay@v1's bar marks %d attempts failed, want 2", n)
	}
	if n := p.count(item("pay@v1") + " rect.tl-backoff"); n != 2 {
		t.Errorf("pay@v1's bar shows %d backoffs, want 2", n)
	}
	// The timer has not fired: pending, not complete; the list says so.
	if s := p.attrs(item("give-up#0"), "data-state"); len(s) != 1 || s[0] != "pending" {
		t.Fatalf("the timer give-up#0 is drawn %v while the run waits, want pending", s)
	}
	if s := p.str(`document.querySelector('#steps li.step[data-key="give-up#0"]').dataset.status`); s != "pending" {
		t.Errorf("the steps list shows the timer %q, want pending", s)
	}
	// Times to the millisecond, and the step's input on demand.
	if when := p.text(`#steps li.step[data-key="pay@v1"] .when`); !strings.Contains(when, ".") || !strings.Contains(when, "UTC") {
		t.Errorf("pay@v1's times read %q, want milliseconds in UTC", when)
	}
	// (The page shows what the engine lists: a store that keeps no
	// inputs yet lists none.)
	if recordsInputs(t, f, "trip-1") {
		if in := p.str(`document.querySelector('#steps li.step[data-key="pay@v1"] details.in pre')?.textContent ?? ''`); !strings.Contains(in, `"cents": 12000`) {
			t.Errorf("pay@v1's input reads %q", in)
		}
	}

	// The event: the page follows without a reload.
	e2eEval[string](p, "window.stemE2EMark = 'unchanged'")
	if err := f.e.SendEvent(f.ctx, "trip-1", "trip.confirmed", "ana"); err != nil {
		t.Fatal(err)
	}
	p.until("the run complete on the page", `document.querySelector('#status')?.textContent.trim() === 'complete'`)
	p.until("the child's bar", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(item("visa"))))
	if mark := p.str("window.stemE2EMark"); mark != "unchanged" {
		t.Fatalf("the page reloaded (mark %q); it must update in place", mark)
	}
	// The select's winner, the event (case 1); the timer lost it.
	if won := p.attrs(`#timeline g.tl-mark[data-call="confirmed-or-not#0"]`, "data-won"); len(won) != 1 || won[0] != "case 1" {
		t.Errorf("the select's mark says %v won, want case 1", won)
	}
	if s := p.attrs(item("give-up#0"), "data-state"); len(s) != 1 || s[0] != "lost" {
		t.Errorf("the timer give-up#0 is drawn %v after the event won the select, want lost", s)
	}
	if s := p.str(`document.querySelector('#steps li.step[data-key="give-up#0"]').dataset.status`); s != "lost" {
		t.Errorf("the steps list shows the timer %q, want lost", s)
	}
	// The child's bar: its own run's span, linking to it.
	if took := p.attrs(item("visa"), "data-took"); len(took) != 1 || took[0] == "" {
		t.Errorf("the child's bar has no duration: %v", took)
	}
	if href := p.str(fmt.Sprintf(`document.querySelector(%s).closest('a').getAttribute('href')`, jsString(item("visa")))); !strings.HasSuffix(href, "runs/trip-1%2Fvisa") {
		t.Errorf("the child's bar links to %q, want its run's page", href)
	}
	if e := p.attrs(item("confirmed#0"), "data-state"); len(e) != 1 || e[0] != "complete" {
		t.Errorf("the event wait is drawn %v, want complete", e)
	}

	// The screenshot: the run's output above its timeline, the steps below.
	e2eEval[bool](p, "(window.scrollTo(0, document.querySelector('#timeline').getBoundingClientRect().top + window.scrollY - 150), true)")
	p.screenshot("dashboard-timeline.png")

	// A bar leads to its entry in the steps list.
	p.click(item("pay@v1"))
	p.until("pay@v1's entry targeted", `location.hash === '#' + document.querySelector('#steps li.step[data-key="pay@v1"] .step-head').id`)
}

// recordsInputs reports whether the fixture's store lists the inputs the
// run's steps recorded, saying so when it does not.
func recordsInputs(t *testing.T, f *e2eFixture, id string) bool {
	t.Helper()
	steps, err := f.e.ListSteps(f.ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if len(s.Input) > 0 {
			return true
		}
	}
	t.Logf("the store lists no step inputs for %s: the page's are not checked", id)
	return false
}
