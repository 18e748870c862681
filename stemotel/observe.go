package stemotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// queueStatsTimeout bounds the store read of one collection of the queue
// gauges: a store that does not answer fails the collection instead of
// holding it (and a Prometheus scrape) up.
const queueStatsTimeout = 10 * time.Second

// Observe reports the queues of e, as Engine.QueueStats counts them, in
// the gauges stem.queue.ready, stem.queue.oldest_ready,
// stem.queue.running and stem.queue.waiting: the named queues, or when
// none is named every queue e registers and the default queue. It also
// reports stem.runs.unserved, the runs in flight of each workflow no live
// engine registers (Engine.Unserved). Each collection of the meter's
// readers reads the store a few times. stop ends the
// reports; call it before closing e, whose QueueStats fails once closed.
//
// Engines that share a store count the same runs: observe one of them,
// or each with queues of its own, not several with the same queues.
func (t *Telemetry) Observe(e *runtime.Engine, queues ...string) (stop func() error, err error) {
	if e == nil {
		return nil, fmt.Errorf("%w: stemotel: Observe of a nil engine", runtime.ErrInvalidArgument)
	}
	for _, q := range queues {
		if err := storage.CheckQueueName(q); err != nil {
			return nil, fmt.Errorf("stemotel: Observe: %w", err)
		}
	}
	reg, err := t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, queueStatsTimeout)
		defer cancel()
		stats, err := e.QueueStats(ctx, queues...)
		if err != nil {
			if errors.Is(err, runtime.ErrClosed) {
				return nil // the engine closed before stop was called
			}
			return fmt.Errorf("stemotel: reading the queues' stats: %w", err)
		}
		for _, s := range stats {
			q := metric.WithAttributes(keyQueue.String(s.Queue))
			o.ObserveInt64(t.queueReady, int64(s.Ready), q)
			o.ObserveFloat64(t.queueOldest, s.OldestReady.Seconds(), q)
			o.ObserveInt64(t.queueRunning, int64(s.Running), q)
			o.ObserveInt64(t.queueWaiting, int64(s.Waiting), q)
		}
		unserved, err := e.Unserved(ctx)
		if err != nil {
			if errors.Is(err, runtime.ErrClosed) {
				return nil
			}
			return fmt.Errorf("stemotel: reading the runs no engine serves: %w", err)
		}
		for _, u := range unserved {
			o.ObserveInt64(t.unserved, u.Total, metric.WithAttributes(keyWorkflow.String(u.Workflow)))
		}
		return nil
	}, t.queueReady, t.queueOldest, t.queueRunning, t.queueWaiting, t.unserved)
	if err != nil {
		return nil, fmt.Errorf("stemotel: registering the queue gauges: %w", err)
	}
	return reg.Unregister, nil
}
