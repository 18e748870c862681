package runtime

import (
	"context"
	"os"
	"time"

	"github.com/stemflow/stem/storage"
)

// Worker is an engine at work as it records itself in the store: its ID,
// host and PID, when it started, the queues and workflows it serves, the
// codec keys it holds and those of payloads it could not open, the
// runs it was executing at its last heartbeat, and when that was.
type Worker = storage.Worker

// Workers lists the live workers sharing the engine's store, by ID: every
// engine whose Run is running records itself (see Config.WorkerTTL), and
// removes itself when Run returns. A worker that died drops out once its
// record expires.
func (e *Engine) Workers(ctx context.Context) ([]Worker, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	return e.store.ListWorkers(ctx)
}

// workerRecord is what Run records of the engine, renewed as it works.
type workerRecord struct {
	e        *Engine
	w        storage.Worker
	inFlight func() int
	failing  bool // the last put failed (warned once until one succeeds)
}

// newWorkerRecord describes the engine at the start of Run.
func (e *Engine) newWorkerRecord(queues, workflows []string, inFlight func() int) *workerRecord {
	host, _ := os.Hostname()
	return &workerRecord{e: e, inFlight: inFlight, w: storage.Worker{
		ID: e.cfg.WorkerID, Host: host, PID: os.Getpid(), StartedAt: e.clock.Now(),
		Queues: queues, Workflows: workflows, KeyIDs: recordKeyIDs(CodecKeyIDs(e.payloads.codec)),
	}}
}

// put records the worker now.
func (r *workerRecord) put(ctx context.Context) {
	r.w.InFlight = r.inFlight()
	r.w.MissingKeyIDs = r.e.sealed.missingIDs()
	ctx, cancel := context.WithTimeout(ctx, r.e.cfg.WorkerTTL/3)
	defer cancel()
	err := r.e.store.PutWorker(ctx, storage.PutWorkerRequest{Worker: r.w, TTL: r.e.cfg.WorkerTTL})
	switch {
	case err != nil && !r.failing && ctx.Err() == nil:
		r.e.log.Warn("stem: recording this worker in the store failed; it may be missing from the list of workers until a renewal succeeds", "worker", r.w.ID, "err", err)
		r.failing = true
	case err == nil && r.failing:
		r.e.log.Info("stem: this worker is recorded in the store again", "worker", r.w.ID)
		r.failing = false
	}
}

// keep renews the record every WorkerTTL/3 until ctx is done, and at once
// when the engine meets a key it lacks, so operators see it.
func (r *workerRecord) keep(ctx context.Context) {
	t := time.NewTicker(r.e.cfg.WorkerTTL / 3)
	defer t.Stop()
	missed := r.e.sealed.changes()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.put(ctx)
		case <-missed:
			r.put(ctx)
		}
	}
}

// remove deletes the record, best effort: one that stays expires.
func (r *workerRecord) remove(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), letGoTimeout)
	defer cancel()
	if err := r.e.store.RemoveWorker(ctx, r.w.ID); err != nil {
		r.e.log.Warn("stem: removing this worker's record from the store failed; it expires on its own", "worker", r.w.ID, "err", err, "within", r.e.cfg.WorkerTTL)
	}
}
