package redisstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/stemflow/stem/storage"
)

var purgeScript = newScript("purge")

func init() { allScripts = append(allScripts, purgeScript) }

// Purge implements storage.Store: one script takes the runs that ended
// before the time, oldest first, from the finished indexes (fx:<status>,
// or fx:<status>:<workflow> when workflows are named), which finish
// (scripts/lib/state.lua) fills and Restart empties, and deletes each
// with its keys (checkpoints, attempts, executions and every ended
// execution's, buffered events through the run's topics set) and its
// index entries. Its children index stays, since its children do. A run
// of an excepted workflow is passed over, at most a thousand per call.
// Limit bounds the call, and the script is atomic, so no other call waits
// on it longer than one batch and no run is deleted twice.
func (s *Store) Purge(ctx context.Context, req storage.PurgeRequest) (storage.PurgeResult, error) {
	var res storage.PurgeResult
	if err := req.Validate(); err != nil {
		return res, fmt.Errorf("redisstore: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return res, err
	}
	dry := ""
	if req.DryRun {
		dry = "1"
	}
	sts := slices.Compact(slices.Sorted(slices.Values(req.PurgeStatuses())))
	wfs := slices.Compact(slices.Sorted(slices.Values(req.Workflows)))
	args := make([]any, 0, 6+len(sts)+len(wfs)+len(req.Except))
	args = append(args, micros(req.FinishedBefore), req.Limit, dry, len(sts))
	for _, st := range sts {
		args = append(args, string(st))
	}
	args = append(args, len(wfs))
	for _, wf := range wfs {
		args = append(args, wf)
	}
	for _, wf := range req.Except {
		args = append(args, wf)
	}
	v, err := s.run(ctx, purgeScript, []string{s.keys.indexAll()}, args...)
	if err != nil {
		return res, fmt.Errorf("redisstore: purge: %w", err)
	}
	list, ok := v.([]any)
	if !ok || len(list) != 2 {
		return res, fmt.Errorf("redisstore: purge: unexpected reply")
	}
	runs, _ := list[0].(int64)
	events, _ := list[1].(int64)
	return storage.PurgeResult{Runs: int(runs), Events: int(events)}, nil
}
