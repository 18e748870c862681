package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// PurgeOptions says which finished runs Engine.Purge deletes.
type PurgeOptions struct {
	// OlderThan: only runs that ended at least this long ago. Required
	// (above zero).
	OlderThan time.Duration
	// Statuses: only runs of these finished statuses; none: complete,
	// errored and terminated.
	Statuses []RunStatus
	// Workflows: only runs of these workflows; none: every workflow.
	Workflows []string
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
}

// PurgeResult says what a purge deleted (or, dry, would delete).
type PurgeResult = storage.PurgeResult

// purgeBatch is how many runs one store call deletes: small enough that a
// batch's transaction is short, large enough that a sweep is a few calls.
const purgeBatch = 500

// sweepBatches caps the batches of one workflow's purge in one sweep, so
// a huge backlog of expired runs is worked off in bursts; a sweep that hit
// the cap comes back after sweepPause instead of a whole SweepInterval, so
// the sweep keeps up with any rate of runs finishing.
const sweepBatches = 20

// sweepPause is the pause between sweeps while expired runs remain.
const sweepPause = 100 * time.Millisecond

// Purge deletes finished runs that match opts, each with everything it owns
// (executions, checkpoints, attempts, buffered events), in batches, and
// reports how many. Unfinished runs are never touched.
func (e *Engine) Purge(ctx context.Context, opts PurgeOptions) (PurgeResult, error) {
	if err := e.checkOpen(); err != nil {
		return PurgeResult{}, err
	}
	if opts.OlderThan <= 0 {
		return PurgeResult{}, invalidArg("purge: OlderThan %v, want above zero", opts.OlderThan)
	}
	req := storage.PurgeRequest{
		FinishedBefore: e.clock.Now().Add(-opts.OlderThan),
		Statuses:       opts.Statuses,
		Workflows:      opts.Workflows,
		Limit:          purgeBatch,
		DryRun:         opts.DryRun,
	}
	if opts.DryRun {
		req.Limit = storage.MaxPurgeBatch
	}
	res, _, err := e.purge(ctx, req, -1)
	return res, err
}

// purge runs req batch after batch until one comes back short, at most
// batches of them (negative: no cap). A dry run counts once, up to its
// Limit. more reports that the cap stopped it with runs left.
func (e *Engine) purge(ctx context.Context, req storage.PurgeRequest, batches int) (total PurgeResult, more bool, err error) {
	for n := 0; batches < 0 || n < batches; n++ {
		res, err := e.store.Purge(ctx, req)
		total.Runs += res.Runs
		total.Events += res.Events
		if err != nil || res.Runs < req.Limit || req.DryRun {
			return total, false, err
		}
	}
	return total, true, nil
}

// sweep runs while Run does: every SweepInterval (the first a random part
// of one after the start, so engines started together spread out) it
// records the engine's workflows and queues again and deletes the finished
// runs past their retention.
func (e *Engine) sweep(ctx context.Context) {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(e.cfg.SweepInterval)) + 1))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.recordCatalog(ctx)
		e.warnUnserved(ctx)
		more, err := e.expire(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Error("stem: deleting expired runs", "err", err)
		}
		if more && err == nil {
			t.Reset(sweepPause) // expired runs remain: keep up
		} else {
			t.Reset(e.cfg.SweepInterval)
		}
	}
}

// expire deletes the finished runs past their retention: each workflow's
// own (from the catalog, so a workflow this engine does not run keeps the
// retention its engines set) or else Config.Retention. It purges workflow
// by workflow, so each purge walks only its workflow's finished runs, then
// once more for the workflows no engine records any more, with
// Config.Retention.
func (e *Engine) expire(ctx context.Context) (more bool, err error) {
	c, err := e.store.GetCatalog(ctx)
	if err != nil {
		return false, err
	}
	now := e.clock.Now()
	// Workflows registered here count with their own settings even before
	// the catalog shows them.
	own := map[string]*time.Duration{}
	e.mu.Lock()
	for name, def := range e.workflows {
		own[name] = def.retention
	}
	e.mu.Unlock()
	for _, w := range c.Workflows {
		if _, ok := own[w.Name]; !ok {
			own[w.Name] = w.Retention
		}
	}
	names := make([]string, 0, len(own))
	for name := range own {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := e.cfg.Retention
		if own[name] != nil {
			r = *own[name]
		}
		if r == 0 {
			continue // kept forever
		}
		res, left, err := e.purge(ctx, storage.PurgeRequest{FinishedBefore: now.Add(-r), Workflows: []string{name}, Limit: purgeBatch}, sweepBatches)
		if err != nil {
			return false, fmt.Errorf("workflow %s: %w", name, err)
		}
		more = more || left
		e.logExpired(res, name, r)
	}
	if e.cfg.Retention == 0 {
		return more, nil
	}
	res, left, err := e.purge(ctx, storage.PurgeRequest{FinishedBefore: now.Add(-e.cfg.Retention), Except: names, Limit: purgeBatch}, sweepBatches)
	e.logExpired(res, "", e.cfg.Retention)
	return more || left, err
}

func (e *Engine) logExpired(res PurgeResult, workflow string, retention time.Duration) {
	if res.Runs == 0 {
		return
	}
	if workflow == "" {
		workflow = "(workflows no engine records)"
	}
	e.log.Info("stem: deleted finished runs past their retention", "runs", res.Runs, "events", res.Events, "workflow", workflow, "retention", retention)
}
