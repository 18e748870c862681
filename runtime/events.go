package runtime

import (
	"fmt"
	"time"

	"github.com/stemflow/stem/storage"
)

// WaitForEvent suspends the run until an event of topic arrives for it (sent
// with SendEvent to this run, or emitted to the topic while it waits), and
// returns the event's payload decoded into T. name is the wait's durable key.
// A timeout above zero bounds the wait: when it passes first, WaitForEvent
// returns an error matching ErrEventTimeout, checkpointed like any result so
// the wait never re-arms. The payload is seen exactly once: it is the wait's
// checkpoint.
func WaitForEvent[T any](c *WorkflowContext, name, topic string, timeout time.Duration) (T, error) {
	var zero T
	x := c.exec
	x.checkStopped()
	if err := validKey(name); err != nil {
		return zero, err
	}
	if topic == "" {
		return zero, invalidArg("event topic is empty")
	}
	key, err := x.useKey(name, false)
	if err != nil {
		return zero, err
	}
	if cp, ok := x.checkpoints[key]; ok {
		return decodeCheckpoint[T](x, cp)
	}
	w := x.claim.Wait
	if w == nil || w.Key != key {
		// The first wait: its deadline is fixed now and persisted.
		w = &storage.Wait{Key: key, Topic: topic, Kind: KindEvent}
		if timeout > 0 {
			d := x.engine.clock.Now().Add(timeout).UTC()
			w.Deadline = &d
		}
	} else if w.Deadline != nil && !x.engine.clock.Now().Before(*w.Deadline) {
		// A registered wait whose deadline passed: a timeout, not a new wait.
		cp, _ := x.checkpoint(storage.Checkpoint{Key: key, Kind: KindEvent, Error: &storage.ErrorInfo{
			Message: x.engine.payloads.sealText(fmt.Sprintf("event %q (topic %q) did not arrive by %s", key, w.Topic, w.Deadline.Format(time.RFC3339Nano))),
			Code:    storage.CodeEventTimeout,
		}}, nil)
		return decodeCheckpoint[T](x, cp)
	}
	cp := x.suspend(key, storage.SuspendRequest{Wait: w, ReadyAt: w.Deadline})
	return decodeCheckpoint[T](x, cp)
}
