package benchwork

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// The workflows Interact runs: "bench-echo" replies to each "echo" update
// with its request; "bench-streamer" appends the time of each "tick"
// update to its stream "out" and replies.
const (
	EchoWorkflow     = "bench-echo"
	StreamerWorkflow = "bench-streamer"
)

// registerInteract registers Interact's workflows and updates with e.
func registerInteract(e *runtime.Engine) error {
	if err := runtime.RegisterUpdate[int, int](e, "echo", nil); err != nil {
		return err
	}
	if err := runtime.RegisterUpdate[int, int](e, "tick", nil); err != nil {
		return err
	}
	if err := runtime.Register(e, EchoWorkflow, func(c *runtime.WorkflowContext, _ int) (int, error) {
		// An entity that serves updates for ever continues as new now and
		// then, so that its history, replayed at each claim, stays short.
		for range entityTurns {
			u, err := runtime.AwaitUpdate[int, int](c, "echo", "echo")
			if err != nil {
				return 0, err
			}
			if err := u.Reply(c, u.Request); err != nil {
				return 0, err
			}
		}
		return 0, runtime.ContinueAsNew(c, 0)
	}); err != nil {
		return err
	}
	return runtime.Register(e, StreamerWorkflow, func(c *runtime.WorkflowContext, _ int) (int, error) {
		for range entityTurns {
			u, err := runtime.AwaitUpdate[int, int](c, "tick", "tick")
			if err != nil {
				return 0, err
			}
			// The time of the append, for the reader's latency; a replay
			// finds the append written and does not call it again.
			if err := runtime.Append(c, "out", time.Now().UnixMicro()); err != nil {
				return 0, err
			}
			if err := u.Reply(c, u.Request); err != nil {
				return 0, err
			}
		}
		return 0, runtime.ContinueAsNew(c, 0)
	})
}

// entityTurns is how many updates Interact's workflows serve in one
// execution.
const entityTurns = 20

// Interact measures, per benchmark iteration, on a worker engine and a
// client engine on their own store instances (another process's
// connections), in one run of the benchmark:
//
//   - commit: the store's own round trip, one write from the client and
//     its answer (a pause or resume of a run no worker serves);
//   - update: an update's round trip, from the client's CallUpdate to its
//     reply, to a run that waits for updates and replies at once;
//   - stream: an append's latency, from the workflow's Append to the
//     client's reader (ReadStream) yielding the value.
//
// It reports each one's p50 and p99 in ms, and the p50 of update and
// stream over commit's (x-commit).
func Interact(b *testing.B, worker, client storage.Store) {
	w := newEngine(b, runtime.Config{Store: worker, Workers: 4})
	c := newEngine(b, runtime.Config{Store: client})
	for _, e := range []*runtime.Engine{w, c} {
		if err := registerInteract(e); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done; w.Close(); c.Close() }()
	suffix := fmt.Sprint(time.Now().UnixNano())
	echo, streamer, idle := "echo-"+suffix, "streamer-"+suffix, "idle-"+suffix
	for _, s := range []struct{ id, workflow string }{{echo, EchoWorkflow}, {streamer, StreamerWorkflow}} {
		if _, err := runtime.Start[int, int](ctx, c, s.workflow, 0, runtime.WithID(s.id)); err != nil {
			b.Fatal(err)
		}
	}
	// A run of a workflow no engine serves: it stays queued, and pausing
	// and resuming it is one write each.
	if _, err := client.CreateRuns(ctx, []storage.NewRun{{ID: idle, Workflow: "bench-nobody", Input: []byte("0")}}); err != nil {
		b.Fatal(err)
	}
	arrived, readErr := make(chan time.Duration, 1), make(chan error, 1)
	go func() {
		for v, err := range runtime.ReadStream[int64](ctx, c, streamer, "out", 0) {
			if err != nil {
				readErr <- err
				return
			}
			arrived <- time.Since(time.UnixMicro(v.Value))
		}
		readErr <- errors.New("the stream's reader ended")
	}()
	next := func() time.Duration {
		select {
		case d := <-arrived:
			return d
		case err := <-readErr:
			b.Fatal(err)
		case <-time.After(time.Minute):
			b.Fatal("the stream's value never reached its reader")
		}
		return 0
	}
	// Warm both runs up: claimed once, their waits registered.
	for _, id := range []string{echo, streamer} {
		name := map[string]string{echo: "echo", streamer: "tick"}[id]
		warm, stop := context.WithTimeout(ctx, time.Minute)
		_, err := runtime.CallUpdate[int](warm, c, id, name, 0)
		stop()
		if err != nil {
			b.Fatalf("warm-up update %s of run %s: %v", name, id, err)
		}
	}
	next()
	var commit, update, stream []time.Duration
	paused := false
	for b.Loop() {
		began := time.Now()
		var err error
		if paused {
			err = client.Resume(ctx, idle)
		} else {
			err = client.Pause(ctx, idle)
		}
		if err != nil {
			b.Fatal(err)
		}
		paused = !paused
		commit = append(commit, time.Since(began))

		began = time.Now()
		if _, err := runtime.CallUpdate[int](ctx, c, echo, "echo", 1); err != nil {
			b.Fatal(err)
		}
		update = append(update, time.Since(began))

		if _, err := runtime.CallUpdate[int](ctx, c, streamer, "tick", 1); err != nil {
			b.Fatal(err)
		}
		stream = append(stream, next())
	}
	cp50, up50, st50 := percentile(commit, 0.50), percentile(update, 0.50), percentile(stream, 0.50)
	b.ReportMetric(ms(cp50), "commit-p50-ms")
	b.ReportMetric(ms(percentile(commit, 0.99)), "commit-p99-ms")
	b.ReportMetric(ms(up50), "update-p50-ms")
	b.ReportMetric(ms(percentile(update, 0.99)), "update-p99-ms")
	b.ReportMetric(ms(st50), "stream-p50-ms")
	b.ReportMetric(ms(percentile(stream, 0.99)), "stream-p99-ms")
	if cp50 > 0 {
		b.ReportMetric(float64(up50)/float64(cp50), "update-x-commit")
		b.ReportMetric(float64(st50)/float64(cp50), "stream-x-commit")
	}
}
