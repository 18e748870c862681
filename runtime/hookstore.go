package runtime

import (
	"context"

	"github.com/stemflow/stem/storage"
)

// hookedStore is the engine's store with Hooks.Store around every call
// but Close.
type hookedStore struct {
	s    storage.Store
	hook func(ctx context.Context, op string, next func(context.Context) error) error
}

var _ storage.Store = hookedStore{}

func (h hookedStore) CreateRuns(ctx context.Context, runs []storage.NewRun) (out []storage.CreateResult, err error) {
	err = h.hook(ctx, "CreateRuns", func(ctx context.Context) error {
		out, err = h.s.CreateRuns(ctx, runs)
		return err
	})
	return out, err
}

func (h hookedStore) GetRun(ctx context.Context, id string) (out storage.RunRecord, err error) {
	err = h.hook(ctx, "GetRun", func(ctx context.Context) error {
		out, err = h.s.GetRun(ctx, id)
		return err
	})
	return out, err
}

func (h hookedStore) ListRuns(ctx context.Context, q storage.ListRunsQuery) (out storage.RunPage, err error) {
	err = h.hook(ctx, "ListRuns", func(ctx context.Context) error {
		out, err = h.s.ListRuns(ctx, q)
		return err
	})
	return out, err
}

func (h hookedStore) CountRuns(ctx context.Context, q storage.CountRunsQuery) (out storage.RunCounts, err error) {
	err = h.hook(ctx, "CountRuns", func(ctx context.Context) error {
		out, err = h.s.CountRuns(ctx, q)
		return err
	})
	return out, err
}

func (h hookedStore) Claim(ctx context.Context, req storage.ClaimRequest) (out []storage.ClaimedRun, err error) {
	err = h.hook(ctx, "Claim", func(ctx context.Context) error {
		out, err = h.s.Claim(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) NextWake(ctx context.Context, req storage.NextWakeRequest) (out storage.NextWake, err error) {
	err = h.hook(ctx, "NextWake", func(ctx context.Context) error {
		out, err = h.s.NextWake(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) LoadReplay(ctx context.Context, runID string) (out storage.Replay, err error) {
	err = h.hook(ctx, "LoadReplay", func(ctx context.Context) error {
		out, err = h.s.LoadReplay(ctx, runID)
		return err
	})
	return out, err
}

func (h hookedStore) Checkpoint(ctx context.Context, req storage.CheckpointRequest) (out storage.CheckpointResult, err error) {
	err = h.hook(ctx, "Checkpoint", func(ctx context.Context) error {
		out, err = h.s.Checkpoint(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) RecordAttempts(ctx context.Context, req storage.RecordAttemptsRequest) error {
	return h.hook(ctx, "RecordAttempts", func(ctx context.Context) error { return h.s.RecordAttempts(ctx, req) })
}

func (h hookedStore) Heartbeat(ctx context.Context, req storage.HeartbeatRequest) (out storage.HeartbeatResult, err error) {
	err = h.hook(ctx, "Heartbeat", func(ctx context.Context) error {
		out, err = h.s.Heartbeat(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) Suspend(ctx context.Context, req storage.SuspendRequest) (out storage.SuspendResult, err error) {
	err = h.hook(ctx, "Suspend", func(ctx context.Context) error {
		out, err = h.s.Suspend(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) TakeEvent(ctx context.Context, req storage.TakeEventRequest) (out *storage.Checkpoint, err error) {
	err = h.hook(ctx, "TakeEvent", func(ctx context.Context) error {
		out, err = h.s.TakeEvent(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) Complete(ctx context.Context, req storage.CompleteRequest) error {
	return h.hook(ctx, "Complete", func(ctx context.Context) error { return h.s.Complete(ctx, req) })
}

func (h hookedStore) Pause(ctx context.Context, runID string) error {
	return h.hook(ctx, "Pause", func(ctx context.Context) error { return h.s.Pause(ctx, runID) })
}

func (h hookedStore) Resume(ctx context.Context, runID string) error {
	return h.hook(ctx, "Resume", func(ctx context.Context) error { return h.s.Resume(ctx, runID) })
}

func (h hookedStore) Terminate(ctx context.Context, req storage.TerminateRequest) (out []string, err error) {
	err = h.hook(ctx, "Terminate", func(ctx context.Context) error {
		out, err = h.s.Terminate(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) Cancel(ctx context.Context, req storage.CancelRequest) error {
	return h.hook(ctx, "Cancel", func(ctx context.Context) error { return h.s.Cancel(ctx, req) })
}

func (h hookedStore) Restart(ctx context.Context, req storage.RestartRequest) error {
	return h.hook(ctx, "Restart", func(ctx context.Context) error { return h.s.Restart(ctx, req) })
}

func (h hookedStore) ContinueAsNew(ctx context.Context, req storage.ContinueRequest) error {
	return h.hook(ctx, "ContinueAsNew", func(ctx context.Context) error { return h.s.ContinueAsNew(ctx, req) })
}

func (h hookedStore) ListExecutions(ctx context.Context, runID string) (out []storage.ExecutionRecord, err error) {
	err = h.hook(ctx, "ListExecutions", func(ctx context.Context) error {
		out, err = h.s.ListExecutions(ctx, runID)
		return err
	})
	return out, err
}

func (h hookedStore) Emit(ctx context.Context, req storage.EmitRequest) (out []string, err error) {
	err = h.hook(ctx, "Emit", func(ctx context.Context) error {
		out, err = h.s.Emit(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) SendEvent(ctx context.Context, ev storage.Event) (out bool, err error) {
	err = h.hook(ctx, "SendEvent", func(ctx context.Context) error {
		out, err = h.s.SendEvent(ctx, ev)
		return err
	})
	return out, err
}

func (h hookedStore) ListSteps(ctx context.Context, q storage.StepsQuery) (out storage.History, err error) {
	err = h.hook(ctx, "ListSteps", func(ctx context.Context) error {
		out, err = h.s.ListSteps(ctx, q)
		return err
	})
	return out, err
}

func (h hookedStore) PutCatalog(ctx context.Context, c storage.Catalog) error {
	return h.hook(ctx, "PutCatalog", func(ctx context.Context) error { return h.s.PutCatalog(ctx, c) })
}

func (h hookedStore) GetCatalog(ctx context.Context) (out storage.Catalog, err error) {
	err = h.hook(ctx, "GetCatalog", func(ctx context.Context) error {
		out, err = h.s.GetCatalog(ctx)
		return err
	})
	return out, err
}

func (h hookedStore) QueueStats(ctx context.Context, queues []string) (out []storage.QueueStats, err error) {
	err = h.hook(ctx, "QueueStats", func(ctx context.Context) error {
		out, err = h.s.QueueStats(ctx, queues)
		return err
	})
	return out, err
}

func (h hookedStore) WriteSchedule(ctx context.Context, w storage.ScheduleWrite) (out storage.ScheduleWriteResult, err error) {
	err = h.hook(ctx, "WriteSchedule", func(ctx context.Context) error {
		out, err = h.s.WriteSchedule(ctx, w)
		return err
	})
	return out, err
}

func (h hookedStore) GetSchedule(ctx context.Context, id string) (out storage.Schedule, err error) {
	err = h.hook(ctx, "GetSchedule", func(ctx context.Context) error {
		out, err = h.s.GetSchedule(ctx, id)
		return err
	})
	return out, err
}

func (h hookedStore) ListSchedules(ctx context.Context, q storage.ScheduleQuery) (out storage.SchedulePage, err error) {
	err = h.hook(ctx, "ListSchedules", func(ctx context.Context) error {
		out, err = h.s.ListSchedules(ctx, q)
		return err
	})
	return out, err
}

func (h hookedStore) DeleteSchedule(ctx context.Context, id string) error {
	return h.hook(ctx, "DeleteSchedule", func(ctx context.Context) error { return h.s.DeleteSchedule(ctx, id) })
}

func (h hookedStore) Purge(ctx context.Context, req storage.PurgeRequest) (out storage.PurgeResult, err error) {
	err = h.hook(ctx, "Purge", func(ctx context.Context) error {
		out, err = h.s.Purge(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) PutWorker(ctx context.Context, req storage.PutWorkerRequest) error {
	return h.hook(ctx, "PutWorker", func(ctx context.Context) error { return h.s.PutWorker(ctx, req) })
}

func (h hookedStore) RemoveWorker(ctx context.Context, id string) error {
	return h.hook(ctx, "RemoveWorker", func(ctx context.Context) error { return h.s.RemoveWorker(ctx, id) })
}

func (h hookedStore) ListWorkers(ctx context.Context) (out []storage.Worker, err error) {
	err = h.hook(ctx, "ListWorkers", func(ctx context.Context) error {
		out, err = h.s.ListWorkers(ctx)
		return err
	})
	return out, err
}

func (h hookedStore) Close() error { return h.s.Close() }

func (h hookedStore) SendUpdate(ctx context.Context, req storage.UpdateRequest) (out storage.UpdateResult, err error) {
	err = h.hook(ctx, "SendUpdate", func(ctx context.Context) error {
		out, err = h.s.SendUpdate(ctx, req)
		return err
	})
	return out, err
}

func (h hookedStore) GetUpdate(ctx context.Context, runID, id string) (out storage.UpdateRecord, err error) {
	err = h.hook(ctx, "GetUpdate", func(ctx context.Context) error {
		out, err = h.s.GetUpdate(ctx, runID, id)
		return err
	})
	return out, err
}

func (h hookedStore) ListUpdates(ctx context.Context, q storage.UpdatesQuery) (out []storage.UpdateRecord, err error) {
	err = h.hook(ctx, "ListUpdates", func(ctx context.Context) error {
		out, err = h.s.ListUpdates(ctx, q)
		return err
	})
	return out, err
}

func (h hookedStore) ReadStream(ctx context.Context, q storage.StreamQuery) (out storage.StreamPage, err error) {
	err = h.hook(ctx, "ReadStream", func(ctx context.Context) error {
		out, err = h.s.ReadStream(ctx, q)
		return err
	})
	return out, err
}

func (h hookedStore) ListStreams(ctx context.Context, runID string) (out []storage.StreamInfo, err error) {
	err = h.hook(ctx, "ListStreams", func(ctx context.Context) error {
		out, err = h.s.ListStreams(ctx, runID)
		return err
	})
	return out, err
}
