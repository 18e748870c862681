package runtime

import (
	"context"
	"fmt"
	"slices"

	"github.com/stemflow/stem/storage"
)

// UnservedWorkflow is a workflow with runs in flight that no live engine
// registers: after a rename, or a deploy that dropped it, its runs would
// sit queued or waiting for ever.
type UnservedWorkflow struct {
	// Workflow is the workflow's durable name, as its runs record it.
	Workflow string
	// InFlight counts its runs not finished (queued, running, waiting or
	// paused), by status.
	InFlight RunCounts
	// Total is the sum of InFlight.
	Total int64
}

// Unserved returns the workflows whose runs no engine would claim: those
// the catalog records (some engine registered them once) that neither this
// engine nor any live worker (ListWorkers) registers now, with runs in
// flight. Each running engine checks it at every sweep and warns of what
// it finds; stemotel.Observe reports it as the gauge stem.runs.unserved,
// and `stem check` and Engine.Replay name the runs.
func (e *Engine) Unserved(ctx context.Context) ([]UnservedWorkflow, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	c, err := e.store.GetCatalog(ctx)
	if err != nil {
		return nil, err
	}
	workers, err := e.store.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	served := map[string]bool{}
	e.mu.Lock()
	for _, n := range e.names {
		served[n] = true
	}
	e.mu.Unlock()
	for _, w := range workers {
		for _, n := range w.Workflows {
			served[n] = true
		}
	}
	var names []string
	for _, w := range c.Workflows {
		if !served[w.Name] && !slices.Contains(names, w.Name) {
			names = append(names, w.Name)
		}
	}
	slices.Sort(names)
	var out []UnservedWorkflow
	for _, n := range names {
		counts, err := e.store.CountRuns(ctx, storage.CountRunsQuery{Workflow: n})
		if err != nil {
			return nil, err
		}
		u := UnservedWorkflow{Workflow: n, InFlight: RunCounts{}}
		for st, k := range counts {
			if k > 0 && !st.Finished() {
				u.InFlight[st] = k
				u.Total += k
			}
		}
		if u.Total > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// warnUnserved logs, at a sweep, each workflow with runs in flight that no
// live engine registers, when it is first seen and whenever its count
// changes.
func (e *Engine) warnUnserved(ctx context.Context) {
	us, err := e.Unserved(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("stem: looking for runs no engine serves", "err", err)
		}
		return
	}
	for _, u := range us {
		if last, ok := e.unserved.Load(u.Workflow); ok && last.(int64) == u.Total {
			continue
		}
		e.unserved.Store(u.Workflow, u.Total)
		e.log.Warn(fmt.Sprintf("stem: %d runs of workflow %q are in flight, but no live engine registers it (renamed or dropped by a deploy?): they will not go on until one does; keep the workflow registered under that name until they finish, or terminate them", u.Total, u.Workflow),
			"workflow", u.Workflow, "runs", u.Total)
	}
}
