package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// BulkWorkflow is the durable name of the workflow that carries out a
// bulk action (RegisterBulk).
const BulkWorkflow = "stem.bulk"

// BulkAction is what a bulk action does to each run its filter matches.
type BulkAction string

// The bulk actions.
const (
	// BulkTerminate terminates each unfinished run (Engine.Terminate).
	BulkTerminate BulkAction = "terminate"
	// BulkCancel requests the cancellation of each unfinished run whose
	// cancellation was not requested yet (Engine.Cancel).
	BulkCancel BulkAction = "cancel"
	// BulkPause pauses each unfinished run that is not paused
	// (Engine.Pause).
	BulkPause BulkAction = "pause"
	// BulkResume resumes each paused run, or one whose pause has not taken
	// effect yet (Engine.Resume).
	BulkResume BulkAction = "resume"
	// BulkRestart restarts each run from the top.
	BulkRestart BulkAction = "restart"
	// BulkRestartFailed restarts each errored run from the step that failed
	// it (a fork: the steps before it are kept): the last checkpoint of
	// kind step with an error in the run's current execution. An errored
	// run without one (its workflow returned an error of its own, a child
	// failed it, it passed its deadline) is skipped.
	BulkRestartFailed BulkAction = "restart-failed"
)

// BulkActions lists the bulk actions.
var BulkActions = []BulkAction{BulkTerminate, BulkCancel, BulkPause, BulkResume, BulkRestart, BulkRestartFailed}

// Valid reports whether a is one of the bulk actions.
func (a BulkAction) Valid() bool { return slices.Contains(BulkActions, a) }

// DefaultBulkRate is how many runs a second a bulk action acts on when
// its request does not say.
const DefaultBulkRate = 100

// BulkRateUnlimited, as BulkRequest.Rate, acts on runs as fast as the
// store takes the changes. Live work then competes with the bulk action
// for the store: keep it for quiet stores and small sets.
const BulkRateUnlimited = -1

// BulkRequest is a bulk action: an action and the filter of the runs it
// acts on.
type BulkRequest struct {
	Action BulkAction
	// Filter selects the runs; its Limit, After, Order and Descending are
	// ignored: a bulk action reads the runs by ID, ascending, a page at a
	// time. Runs of BulkWorkflow (bulk actions) are never acted on.
	Filter ListRunsQuery
	// Reason is recorded by terminate and cancel (at most
	// storage.MaxCancelReason bytes of text); "" records "bulk action ID".
	// The other actions record none and refuse one.
	Reason string
	// Rate bounds the runs acted on per second; 0 is DefaultBulkRate,
	// BulkRateUnlimited (any negative rate) sets no bound. Runs the
	// listing already rules out (a terminate's finished runs) cost
	// nothing and are not counted against it.
	Rate float64
	// ID, when set, is the bulk action's ID (its run's); "" draws one.
	// Starting an ID that exists returns that bulk action, not a second.
	ID string
}

// BulkProgress is how far a bulk action has gone.
type BulkProgress struct {
	// Matched counts the runs the filter matched so far; Acted those
	// acted on, Skipped those that no longer needed it (ended, restarted
	// meanwhile), Failed those the action was refused for. Matched is
	// always Acted + Skipped + Failed. A run acted on just before the
	// bulk action was interrupted may count as skipped when it is
	// resumed: it finds the run already done.
	Matched, Acted, Skipped, Failed int
	// Done is set once every matching run was seen.
	Done bool
	// Errors are the last few refusals and skips that say something (a
	// restart-failed's run without a failed step), each naming its run.
	Errors []string `json:",omitempty"`
}

// BulkInfo is a bulk action as its run records it.
type BulkInfo struct {
	ID      string
	Request BulkRequest
	// Status is the status of the bulk action's run: queued or running
	// while it goes on (queued also while no engine that registered
	// RegisterBulk works), complete once done, errored when a page kept
	// failing (Err says why), terminated when stopped by hand.
	Status   RunStatus
	Progress BulkProgress
	// Err is why an errored or terminated bulk action ended.
	Err       error
	CreatedAt time.Time
	UpdatedAt time.Time
	// EndedAt is when it ended, nil while it goes on.
	EndedAt *time.Time
}

// The shape of a bulk action's run: variables so that a test may make
// pages and executions short.
var (
	// bulkMaxPage is the most runs one page (one step) lists.
	bulkMaxPage = 100
	// bulkPagesPerExecution is how many pages an execution goes through
	// before it continues as new, so that a bulk action over millions of
	// runs keeps a short history to replay after a hand-over.
	bulkPagesPerExecution = 100
)

// The constants of a bulk action's run.
const (
	// bulkVersion is the version of BulkWorkflow's code.
	bulkVersion = 1
	// bulkMaxErrors is how many refusals BulkProgress.Errors keeps.
	bulkMaxErrors = 10
	// bulkParallel is how many runs a page acts on at once at most.
	bulkParallel = 8
	// bulkCountPage is the page size of CountMatching.
	bulkCountPage = 1000
	// bulkListKey and bulkPageKey are the steps of BulkWorkflow: the first
	// page's listing, then each page (autoversion), which acts on the
	// runs of its page and lists the next.
	bulkListKey = "list@v1"
	bulkPageKey = "page@v1"
)

// bulkStepOptions are the steps' retries: a page that fails (the store
// did not answer) is done again, which acts on no run twice, up to about
// ten minutes before the bulk action errors (ContinueBulk goes on from the
// page that failed). A variable so that a test may fail a page at once.
var bulkStepOptions = StepOptions{Retries: 12, Backoff: time.Second, MaxBackoff: time.Minute}

// Validate checks the request as StartBulk does: a known action, a filter
// the stores take (storage.ListRunsQuery.Validate), a reason only for
// terminate and cancel, and a rate that is a number.
func (r BulkRequest) Validate() error {
	if !r.Action.Valid() {
		names := make([]string, len(BulkActions))
		for i, a := range BulkActions {
			names[i] = string(a)
		}
		if r.Action == "" {
			return invalidArg("bulk action: no action (want one of %s)", strings.Join(names, ", "))
		}
		return invalidArg("bulk action: unknown action %q (want one of %s)%s", r.Action, strings.Join(names, ", "), didYouMean(string(r.Action), names))
	}
	if r.Filter.Status != "" && !r.Filter.Status.Valid() {
		return invalidArg("bulk action: unknown run status %q", r.Filter.Status)
	}
	if r.Filter.Workflow == BulkWorkflow {
		return invalidArg("bulk action: runs of %s are bulk actions, which bulk actions do not act on; terminate one with Terminate", BulkWorkflow)
	}
	if err := r.query().Validate(); err != nil {
		return err
	}
	if r.Reason != "" {
		if r.Action != BulkTerminate && r.Action != BulkCancel {
			return invalidArg("bulk action %s: a reason is recorded only by terminate and cancel", r.Action)
		}
		if err := (storage.CancelRequest{RunID: "-", Reason: r.Reason}).Validate(); err != nil {
			return fmt.Errorf("bulk action %s: %w", r.Action, err)
		}
	}
	if math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0) {
		return invalidArg("bulk action: rate %v is not a number of runs per second", r.Rate)
	}
	if r.ID != "" {
		if err := validRunID(r.ID); err != nil {
			return err
		}
	}
	return nil
}

// query is the request's filter as a bulk action reads it: by ID,
// ascending, from the start.
func (r BulkRequest) query() ListRunsQuery {
	q := r.Filter
	q.Limit, q.After, q.Order, q.Descending = 0, "", storage.OrderID, false
	q.Where = slices.Clone(q.Where)
	q.Versions = slices.Clone(q.Versions)
	return q
}

// every is the least time between two runs acted on; 0 for no bound.
func (r BulkRequest) every() time.Duration {
	switch {
	case r.Rate < 0:
		return 0
	case r.Rate == 0:
		return time.Second / DefaultBulkRate
	}
	return time.Duration(float64(time.Second) / r.Rate)
}

// pageSize is how many runs a page lists: about a second's worth at the
// request's rate, at most bulkMaxPage.
func (r BulkRequest) pageSize() int {
	rate := r.Rate
	switch {
	case rate < 0:
		return bulkMaxPage
	case rate == 0:
		rate = DefaultBulkRate
	}
	return int(min(max(math.Ceil(rate), 1), float64(bulkMaxPage)))
}

// reason is what terminate and cancel record.
func (r BulkRequest) reason(id string) string {
	if r.Reason != "" {
		return r.Reason
	}
	return "bulk action " + id
}

// bulkInput is BulkWorkflow's input: the request, and where an execution
// before this one left off (it continues as new every
// bulkPagesPerExecution pages).
type bulkInput struct {
	BulkRequest
	Carry *bulkCarry `json:",omitempty"`
}

// bulkCarry is what one execution of a bulk action hands the next: the
// listing of the page it did not act on yet, and the progress so far.
type bulkCarry struct {
	Page     bulkPage
	Progress BulkProgress
}

// bulkPage is a page of the runs to act on, as its listing saw them: the
// listing is checkpointed before any of them is acted on, so the step that
// acts on them acts on what the listing saw, also when it runs again after
// a crash (a restart's IfExecution is the execution the listing saw).
type bulkPage struct {
	Runs []bulkItem `json:"runs,omitempty"`
	// Next is the cursor of the page after this one; "" when this is the
	// last.
	Next string `json:"next,omitempty"`
}

// bulkItem is one run of a page.
type bulkItem struct {
	ID string `json:"id"`
	// Exec is the run's execution when listed.
	Exec int `json:"exec"`
	// Skip, when set, is why the listing already rules the run out (it
	// ended, it is paused already).
	Skip string `json:"skip,omitempty"`
}

// bulkPageDone is what a page's step did, and the next page's listing.
type bulkPageDone struct {
	Acted, Skipped, Failed int
	Errors                 []string `json:",omitempty"`
	Next                   bulkPage
}

// RegisterBulk registers the workflow that carries out bulk actions
// (BulkWorkflow), so this engine's workers run them: the operator command
// and its dashboard register it; an application's workers may, so that a
// bulk action goes on whether or not a tool is running. It is an
// ordinary workflow of the default queue, one run per bulk action, which
// takes one worker slot while it works.
func RegisterBulk(e *Engine) error {
	return Register(e, BulkWorkflow, bulkWorkflow, WorkflowVersion(bulkVersion))
}

// bulkWorkflow carries out a bulk action: it lists the first page, then
// acts on each page in a step that also lists the next, and publishes its
// progress after each.
func bulkWorkflow(c *WorkflowContext, in bulkInput) (BulkProgress, error) {
	e := c.exec.engine
	req := in.BulkRequest
	id := c.RunID()
	var prog BulkProgress
	var page bulkPage
	if in.Carry != nil {
		prog, page = in.Carry.Progress, in.Carry.Page
	} else {
		var err error
		page, err = Step(c, bulkListKey, bulkStepOptions, func(sc StepContext) (bulkPage, error) {
			return e.bulkList(sc, req, "")
		})
		if err != nil {
			return prog, err
		}
	}
	opts := bulkStepOptions
	opts.Autoversion = true
	for n := 0; len(page.Runs) > 0 || page.Next != ""; n++ {
		if n == bulkPagesPerExecution {
			return prog, ContinueAsNew(c, bulkInput{BulkRequest: in.BulkRequest, Carry: &bulkCarry{Page: page, Progress: prog}})
		}
		cur := page
		done, err := Step(c, bulkPageKey, opts, func(sc StepContext) (bulkPageDone, error) {
			return e.bulkPage(sc, id, req, cur)
		})
		if err != nil {
			return prog, err
		}
		prog.add(len(cur.Runs), done)
		page = done.Next
		if err := SetProgress(c, prog); err != nil {
			return prog, err
		}
	}
	prog.Done = true
	if err := SetProgress(c, prog); err != nil {
		return prog, err
	}
	return prog, nil
}

// add counts a page of n runs in.
func (p *BulkProgress) add(n int, d bulkPageDone) {
	p.Matched += n
	p.Acted += d.Acted
	p.Skipped += d.Skipped
	p.Failed += d.Failed
	p.Errors = append(p.Errors, d.Errors...)
	if over := len(p.Errors) - bulkMaxErrors; over > 0 {
		p.Errors = slices.Clone(p.Errors[over:])
	}
}

// bulkList lists the page of the runs req acts on after the cursor.
func (e *Engine) bulkList(ctx context.Context, req BulkRequest, after string) (bulkPage, error) {
	q := req.query()
	q.After, q.Limit = after, req.pageSize()
	page, err := e.store.ListRuns(ctx, q)
	if err != nil {
		return bulkPage{}, err
	}
	out := bulkPage{Next: page.Next}
	for _, r := range page.Runs {
		if r.Workflow == BulkWorkflow {
			continue // never a bulk action, this one or another
		}
		out.Runs = append(out.Runs, bulkItem{ID: r.ID, Exec: r.Execution, Skip: bulkSkip(req.Action, &r)})
	}
	return out, nil
}

// bulkSkip says why the action does not apply to a run as listed, or "".
func bulkSkip(a BulkAction, r *storage.RunRecord) string {
	paused := r.Status == StatusPaused || r.PauseRequested
	switch {
	case a == BulkResume:
		if !paused {
			return "not paused"
		}
	case a == BulkRestart:
	case a == BulkRestartFailed:
		if r.Status != StatusErrored {
			return "not errored"
		}
	case r.Status.Finished():
		return "ended"
	case a == BulkCancel && r.CancelRequested:
		return "cancellation requested already"
	case a == BulkPause && paused:
		return "paused already"
	}
	return ""
}

// bulkPage acts on the runs of a page, starting one per req.every() at
// most, and up to bulkParallel at once (so that a store's group commit
// shares a sync among them when the rate allows), then lists the next
// page. It is a step: when it runs again (its engine died mid-way), it
// acts on the same listing, and the runs it acted on before are skipped:
// ended, paused or resumed already, or restarted (a restart is
// conditional on the execution the listing saw).
func (e *Engine) bulkPage(parent context.Context, id string, req BulkRequest, page bulkPage) (bulkPageDone, error) {
	type outcome struct {
		acted bool
		why   string
		err   error
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	outcomes := make([]outcome, len(page.Runs))
	p := pacer{clock: e.clock, every: req.every()}
	slots := make(chan struct{}, bulkParallel)
	var wg sync.WaitGroup
	for i, it := range page.Runs {
		if it.Skip != "" {
			continue
		}
		if p.wait(ctx) != nil {
			break
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			acted, why, err := e.bulkAct(ctx, id, req, it)
			outcomes[i] = outcome{acted, why, err}
			if err != nil && !bulkRefused(err) {
				cancel() // the store failed: the page is done again
			}
		})
	}
	wg.Wait()
	if err := parent.Err(); err != nil {
		return bulkPageDone{}, err
	}
	var done bulkPageDone
	for i, it := range page.Runs {
		o := outcomes[i]
		switch {
		case it.Skip != "":
			done.Skipped++
		case o.err != nil && bulkRefused(o.err):
			done.Failed++
			done.Errors = append(done.Errors, fmt.Sprintf("%s: %s", it.ID, strings.TrimPrefix(o.err.Error(), ErrInvalidArgument.Error()+": ")))
		case o.err != nil && !errors.Is(o.err, context.Canceled):
			// The store failed: the step is retried, and acts on no run
			// twice.
			return bulkPageDone{}, fmt.Errorf("bulk action %s: %s of run %s: %w", id, req.Action, it.ID, o.err)
		case o.acted:
			done.Acted++
		case o.err == nil:
			done.Skipped++
			if o.why != "" {
				done.Errors = append(done.Errors, fmt.Sprintf("%s: skipped: %s", it.ID, o.why))
			}
		}
	}
	if ctx.Err() != nil {
		// Cancelled by a failure whose run the loop above did not reach.
		return bulkPageDone{}, fmt.Errorf("bulk action %s: %s stopped: %w", id, req.Action, ctx.Err())
	}
	if page.Next != "" {
		next, err := e.bulkList(ctx, req, page.Next)
		if err != nil {
			return bulkPageDone{}, err
		}
		done.Next = next
		if slices.ContainsFunc(next.Runs, func(it bulkItem) bool { return it.Skip == "" }) {
			// The next page's first run waits its turn here, so that the
			// rate holds across pages.
			if err := p.wait(ctx); err != nil {
				return bulkPageDone{}, err
			}
		}
	}
	if over := len(done.Errors) - bulkMaxErrors; over > 0 {
		done.Errors = done.Errors[over:]
	}
	return done, nil
}

// bulkRefused reports whether err refuses the action on one run for a
// reason of its own, which counts it failed; other errors are the
// store's, and the page is done again.
func bulkRefused(err error) bool {
	for _, s := range []error{ErrInvalidArgument, ErrPayloadTooLarge, ErrDecode, ErrSealed, ErrUnknownWorkflow} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// bulkAct acts on one run: acted is true when it did, else why says why
// it did not need to (which a skip the listing could not foresee reports
// only when it is worth reading). err is a refusal (bulkRefused) or the
// store's failure.
func (e *Engine) bulkAct(ctx context.Context, id string, req BulkRequest, it bulkItem) (acted bool, why string, err error) {
	switch req.Action {
	case BulkTerminate:
		err = e.Terminate(ctx, it.ID, req.reason(id))
	case BulkCancel:
		err = e.Cancel(ctx, it.ID, cancelReason(req.reason(id)))
	case BulkPause:
		err = e.Pause(ctx, it.ID)
	case BulkResume:
		err = e.Resume(ctx, it.ID)
	case BulkRestart:
		err = e.Restart(ctx, it.ID, IfExecution(it.Exec))
	case BulkRestartFailed:
		var key string
		key, why, err = e.failedStep(ctx, it)
		if err == nil && key == "" {
			return false, why, nil
		}
		if err == nil {
			err = e.Restart(ctx, it.ID, FromStep(key), IfExecution(it.Exec))
		}
	default:
		return false, "", invalidArg("unknown bulk action %q", req.Action)
	}
	switch {
	case err == nil:
		return true, "", nil
	case errors.Is(err, ErrInvalidState), errors.Is(err, storage.ErrConflict):
		return false, "", nil // done already, by this action before a crash or by someone else
	case errors.Is(err, ErrRunNotFound):
		return false, "", nil // deleted meanwhile
	}
	return false, "", err
}

// failedStep returns the key of the step that failed the run in the
// execution the listing saw: the last checkpoint of kind step with an
// error. Without one, key is "" and why says so.
func (e *Engine) failedStep(ctx context.Context, it bulkItem) (key, why string, err error) {
	h, err := e.store.ListSteps(ctx, storage.StepsQuery{RunID: it.ID, Execution: it.Exec})
	if err != nil {
		return "", "", err
	}
	for i := len(h.Steps) - 1; i >= 0; i-- {
		if s := h.Steps[i]; s.Kind == KindStep && s.Error != nil {
			return s.Key, "", nil
		}
	}
	return "", fmt.Sprintf("no failed step in execution %d (its workflow, a child or a deadline failed it): restart it from the top or a step", it.Exec), nil
}

// pacer spaces the runs a page acts on by every, on the engine's clock.
type pacer struct {
	clock storage.Clock
	every time.Duration
	// next is when the next run may be acted on; zero: at once.
	next time.Time
}

// wait waits for the next run's turn.
func (p *pacer) wait(ctx context.Context) error {
	if p.every <= 0 {
		return ctx.Err()
	}
	now := p.clock.Now()
	if d := p.next.Sub(now); d > 0 {
		ch, stop := storage.NewTimer(p.clock, d)
		select {
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-ch:
		}
		now = p.next
	}
	p.next = now.Add(p.every)
	return nil
}

// StartBulk starts a bulk action and returns its ID. The request is
// checked first (BulkRequest.Validate), with nothing written when it is
// refused. The bulk action is carried out by an engine that registered
// RegisterBulk, this one or another sharing the store: until one works,
// it waits, queued.
func (e *Engine) StartBulk(ctx context.Context, req BulkRequest) (string, error) {
	if err := e.checkOpen(); err != nil {
		return "", err
	}
	if err := req.Validate(); err != nil {
		return "", err
	}
	stored := bulkInput{BulkRequest: req}
	stored.ID = ""
	stored.Filter = req.query()
	in, err := e.payloads.encode("input of "+BulkWorkflow, stored)
	if err != nil {
		return "", err
	}
	run := storage.NewRun{ID: req.ID, Workflow: BulkWorkflow, Input: in, Version: bulkVersion, Queue: DefaultQueue}
	if run.ID == "" {
		run.ID = newRunID()
	}
	res, err := e.create(ctx, []storage.NewRun{run})
	if err != nil {
		return "", err
	}
	return res[0].Run.ID, nil
}

// GetBulk returns a bulk action's state: ErrRunNotFound when there is
// none, ErrInvalidArgument when the run is not a bulk action.
func (e *Engine) GetBulk(ctx context.Context, id string) (BulkInfo, error) {
	if err := e.checkOpen(); err != nil {
		return BulkInfo{}, err
	}
	r, err := e.store.GetRun(ctx, id)
	if err != nil {
		return BulkInfo{}, err
	}
	if r.Workflow != BulkWorkflow {
		return BulkInfo{}, invalidArg("run %s is a run of %s, not a bulk action", id, r.Workflow)
	}
	return e.bulkInfo(r)
}

// bulkInfo reads a bulk action from its run.
func (e *Engine) bulkInfo(r storage.RunRecord) (BulkInfo, error) {
	info := e.runInfo(r)
	b := BulkInfo{ID: r.ID, Status: r.Status, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.Status.Finished() {
		b.EndedAt = r.EndedAt
	}
	if info.Status == StatusErrored || info.Status == StatusTerminated {
		b.Err = info.Err
	}
	if info.InputErr != nil {
		return b, info.InputErr
	}
	var in bulkInput
	if err := decodeJSON("input of bulk action "+r.ID, info.Input, e.cfg.MaxPayloadBytes, &in); err != nil {
		return b, err
	}
	b.Request = in.BulkRequest
	b.Request.ID = r.ID
	if in.Carry != nil {
		b.Progress = in.Carry.Progress
	}
	if info.Status == StatusComplete && len(info.Output) > 0 {
		if err := decodeJSON("result of bulk action "+r.ID, info.Output, e.cfg.MaxPayloadBytes, &b.Progress); err != nil {
			return b, err
		}
		return b, nil
	}
	if p, ok, err := decodeProgress[BulkProgress](e, info); err != nil {
		return b, err
	} else if ok {
		b.Progress = p
	}
	if info.OpenErr != nil {
		return b, info.OpenErr
	}
	return b, nil
}

// ContinueBulk goes on with a bulk action that stopped: an errored one (a
// page kept failing; BulkInfo.Err says why) is restarted from the page
// that failed, the pages before it kept, so that it acts on no run it
// acted on before; a paused one is resumed. A queued or running one needs
// nothing (an engine that registered RegisterBulk carries it on), nor
// does a complete one. A terminated one is ErrInvalidState; a run that is
// no bulk action ErrInvalidArgument.
func (e *Engine) ContinueBulk(ctx context.Context, id string) error {
	b, err := e.GetBulk(ctx, id)
	if err != nil {
		return err
	}
	switch b.Status {
	case StatusTerminated:
		return fmt.Errorf("%w: bulk action %s was terminated; start another for the runs it did not reach", ErrInvalidState, id)
	case StatusPaused:
		return e.Resume(ctx, id)
	case StatusErrored:
	default:
		return nil
	}
	r, err := e.store.GetRun(ctx, id)
	if err != nil {
		return err
	}
	h, err := e.store.ListSteps(ctx, storage.StepsQuery{RunID: id, Execution: r.Execution})
	if err != nil {
		return err
	}
	for i := len(h.Steps) - 1; i >= 0; i-- {
		if s := h.Steps[i]; s.Kind == KindStep && s.Error != nil {
			return e.Restart(ctx, id, FromStep(s.Key), IfExecution(r.Execution))
		}
	}
	return fmt.Errorf("%w: bulk action %s failed outside its pages (%v), so where it stopped is not known; start another", ErrInvalidState, id, b.Err)
}

// ListBulks returns the newest bulk actions, newest first: at most limit
// (0: storage.DefaultPageSize).
func (e *Engine) ListBulks(ctx context.Context, limit int) ([]BulkInfo, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, invalidArg("list bulk actions: limit %d is negative", limit)
	}
	page, err := e.store.ListRuns(ctx, ListRunsQuery{Workflow: BulkWorkflow, Order: storage.OrderCreated, Descending: true, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]BulkInfo, 0, len(page.Runs))
	for _, r := range page.Runs {
		b, err := e.bulkInfo(r)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// CountMatching counts the runs q matches, up to upTo (more reports that
// there are more): those a bulk action with the filter q would act on,
// which leaves out bulk actions' own runs. q's Limit, After and Order are
// ignored. It reads the listing a page at a time, so its cost grows with
// upTo: a count before a bulk action bounds it.
func (e *Engine) CountMatching(ctx context.Context, q ListRunsQuery, upTo int) (n int, more bool, err error) {
	if err := e.checkOpen(); err != nil {
		return 0, false, err
	}
	if upTo < 1 {
		return 0, false, invalidArg("count runs: upTo %d, want 1 or more", upTo)
	}
	if q.Status != "" && !q.Status.Valid() {
		return 0, false, invalidArg("count runs: unknown run status %q", q.Status)
	}
	q = BulkRequest{Filter: q}.query()
	if err := q.Validate(); err != nil {
		return 0, false, err
	}
	for {
		q.Limit = min(bulkCountPage, upTo-n+1)
		page, err := e.store.ListRuns(ctx, q)
		if err != nil {
			return 0, false, err
		}
		for _, r := range page.Runs {
			if r.Workflow == BulkWorkflow {
				continue
			}
			if n == upTo {
				return n, true, nil
			}
			n++
		}
		if page.Next == "" {
			return n, false, nil
		}
		q.After = page.Next
	}
}
