package runtime

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// Streams: a run hands values to its readers as it makes them.
//
// A workflow appends values to a named stream of its run (Append, or the
// generated Append<Type>); a step appends with AppendInStep, and its values
// are written with its checkpoint, by the attempt that writes it, so a
// retried or replayed step never appends twice. Readers (ReadStream, or the
// generated Stream<Type>) get the values in order from any offset, as they
// are written, in any process: a reader that disconnects resumes from the
// offset after the last value it had. A stream goes on across the run's
// executions (ContinueAsNew) and is deleted with the run.

// streamCall is the key prefix of a workflow's writes to a stream.
const streamCall = "stream:"

// Append appends v to the run's stream named stream, durably: the value is
// written with a checkpoint of the run, keyed by the stream's name and the
// call's order (stream:<name>, stream:<name>#1, ...), so a replay finds it
// written and does not append it again. v is encoded as JSON, within the
// engine's payload limit.
func Append(c *WorkflowContext, stream string, v any) error {
	return writeStream(c, stream, v, true, false)
}

// CloseStream closes the run's stream named stream, durably, as Append
// writes: readers that reach its end stop there instead of waiting for
// more. A later Append opens it again. A stream needs no closing: readers
// also stop at the end of a stream of a run that has ended.
func CloseStream(c *WorkflowContext, stream string) error {
	return writeStream(c, stream, nil, false, true)
}

// writeStream writes v (when value) to stream, closing it after (when
// closing), as a checkpoint of kind KindStream.
func writeStream(c *WorkflowContext, stream string, v any, value, closing bool) error {
	x := c.exec
	x.checkStopped()
	if err := storage.CheckStreamName(stream); err != nil {
		return err
	}
	key, err := x.repeatKey(streamCall+stream, asAppend)
	if err != nil {
		return err
	}
	_, ok, err := x.begin(c.detached, key, key)
	if ok || err != nil {
		return err
	}
	w := storage.StreamWrite{Stream: stream, Close: closing}
	if value {
		b, err := x.engine.payloads.encode("value of stream "+stream, v)
		if err != nil {
			return err
		}
		w.Values = [][]byte{b}
	}
	x.writeWith(storage.Checkpoint{Key: key, Kind: KindStream}, nil, false, &cpExtras{streams: []storage.StreamWrite{w}})
	return nil
}

// AppendInStep appends v to the run's stream named stream from a step
// (sc is the step's context). The value is written with the step's
// checkpoint, by the attempt that writes it: the values of an attempt
// that fails are dropped with it, and a step that succeeded is not run, nor
// its values appended, again. Readers see the step's values when its
// checkpoint is written; to hand values over one by one, append them
// from the workflow (Append) or from one step each. An attempt appends at
// most storage.MaxStreamWrite values. A transactional step
// (TxStep) cannot append; its attempt fails for good.
func AppendInStep(sc StepContext, stream string, v any) error {
	s, ok := sc.(*stepContext)
	if !ok {
		return invalidArg("AppendInStep takes the StepContext a step is given, not a %T", sc)
	}
	if err := storage.CheckStreamName(stream); err != nil {
		return err
	}
	b, err := s.x.engine.payloads.encode("value of stream "+stream, v)
	if err != nil {
		return err
	}
	return s.streams.add(stream, b)
}

// stepStreams is an attempt's appends, in order, merged per stream where
// they follow each other.
type stepStreams struct {
	mu     sync.Mutex
	writes []storage.StreamWrite
	n      int
	sealed bool
}

func (s *stepStreams) add(stream string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed {
		return invalidArg("append to stream %q after the step returned", stream)
	}
	if s.n == storage.MaxStreamWrite {
		return invalidArg("append to stream %q: a step's attempt appends at most %d values, written with its checkpoint; split the work into more steps", stream, storage.MaxStreamWrite)
	}
	s.n++
	if n := len(s.writes); n > 0 && s.writes[n-1].Stream == stream {
		s.writes[n-1].Values = append(s.writes[n-1].Values, b)
		return nil
	}
	s.writes = append(s.writes, storage.StreamWrite{Stream: stream, Values: [][]byte{b}})
	return nil
}

// seal ends the attempt's appends: the step returned.
func (s *stepStreams) seal() {
	s.mu.Lock()
	s.sealed = true
	s.mu.Unlock()
}

// take returns the attempt's appends.
func (s *stepStreams) take() []storage.StreamWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.writes
	s.writes = nil
	return w
}

// Streamed is a value read from a run's stream.
type Streamed[T any] struct {
	// Offset is the value's place in the stream, from 0: resume after it
	// from Offset+1.
	Offset    int64
	Value     T
	WrittenAt time.Time
}

// streamPage is how many values a reader reads at once.
const streamPage = 1000

// ReadStream returns the values of the stream named stream of run runID
// from offset from on, in order, as they are written: at the end of what
// is written it waits for more, woken by the writes of this engine and
// (on stores that announce them) of other processes, and it ends when it
// reaches the end of a closed stream or of a run that has ended. A value
// that does not decode into T, an unknown run, or ctx's end is yielded
// as an error, and the sequence ends. Stop early by breaking the loop.
func ReadStream[T any](ctx context.Context, e *Engine, runID, stream string, from int64) iter.Seq2[Streamed[T], error] {
	return readTyped[T](ctx, e, runID, stream, from, true)
}

// ReadStreamSoFar is ReadStream without the wait: it yields the values
// written when it reaches them, from offset from on, and ends at the end
// of what is written (a stream never written has none), for a reader
// that shows a stream as it is now.
func ReadStreamSoFar[T any](ctx context.Context, e *Engine, runID, stream string, from int64) iter.Seq2[Streamed[T], error] {
	return readTyped[T](ctx, e, runID, stream, from, false)
}

// readTyped is ReadStream (follow) and ReadStreamSoFar.
func readTyped[T any](ctx context.Context, e *Engine, runID, stream string, from int64, follow bool) iter.Seq2[Streamed[T], error] {
	return func(yield func(Streamed[T], error) bool) {
		var zero Streamed[T]
		if err := e.checkOpen(); err != nil {
			yield(zero, err)
			return
		}
		for v, err := range e.readStream(ctx, runID, stream, from, follow) {
			if err != nil {
				yield(zero, err)
				return
			}
			out := Streamed[T]{Offset: v.Offset, WrittenAt: v.WrittenAt}
			if err := e.payloads.decode(fmt.Sprintf("value %d of stream %s of run %s", v.Offset, stream, runID), v.Value, &out.Value); err != nil {
				yield(zero, err)
				return
			}
			if !yield(out, nil) {
				return
			}
		}
	}
}

// readStream yields a stream's stored values from from on; with follow
// it waits for more as ReadStream says, else it ends at the end of what
// is written.
func (e *Engine) readStream(ctx context.Context, runID, stream string, from int64, follow bool) iter.Seq2[storage.StreamValue, error] {
	return func(yield func(storage.StreamValue, error) bool) {
		if from < 0 {
			yield(storage.StreamValue{}, invalidArg("stream offset %d is negative", from))
			return
		}
		var p poll
		if follow {
			p = e.newPoll()
		}
		key := storage.StreamAnnouncement(runID, stream)
		for {
			// Watched before the read, so a write in between wakes the
			// reader.
			var w watched
			if follow {
				w = e.watch(key, runID)
			}
			page, err := e.store.ReadStream(ctx, storage.StreamQuery{RunID: runID, Stream: stream, From: from, Limit: streamPage})
			switch {
			case err != nil:
				w.stop()
				yield(storage.StreamValue{}, err)
				return
			case len(page.Values) > 0:
				w.stop()
				for _, v := range page.Values {
					if !yield(v, nil) {
						return
					}
				}
				from, p.delay = page.Next, pollFirst
				continue
			case !follow || page.Closed || page.RunStatus.Finished():
				w.stop()
				return
			}
			if err := w.wait(ctx, &p); err != nil {
				yield(storage.StreamValue{}, err)
				return
			}
		}
	}
}

// pollFirst is the first delay of a caller's safety-net read where the
// store does not announce every run's end.
const pollFirst = 5 * time.Millisecond

// poll is the backoff of a caller's safety-net reads (see Engine.wait).
type poll struct{ delay, most time.Duration }

// newPoll begins the watch of the store's announcements and returns the
// backoff that suits it: where the store announces every end and write,
// the read is only a safety net against a lost announcement (missed ones
// are announced too, storage.Missed), beginning at four poll intervals and
// backing off to heardPollMost, so thousands of waiting callers do not
// read every PollInterval; elsewhere it is how another process's write is
// learnt, and begins at once.
func (e *Engine) newPoll() poll {
	if e.watchFinished() {
		return poll{4 * e.cfg.PollInterval, max(4*e.cfg.PollInterval, heardPollMost)}
	}
	return poll{pollFirst, e.cfg.PollInterval}
}

// watched is a caller's wait for an announcement (a reply, a stream's
// write) or its run's end, here or from the store.
type watched struct {
	e           *Engine
	key, run    string
	heard, ends *runWaiters
}

// watch begins a caller's wait for key's announcement or run's end.
func (e *Engine) watch(key, run string) watched {
	return watched{e: e, key: key, run: run, heard: e.waiters.add(key), ends: e.waiters.add(run)}
}

func (w watched) stop() {
	if w.e == nil {
		return // no watch: a read that does not wait
	}
	w.e.waiters.remove(w.key, w.heard)
	w.e.waiters.remove(w.run, w.ends)
}

// wait waits for the announcement, the run's end, p's delay (which then
// grows) or ctx's end, and ends the watch. A closed engine is ErrClosed.
func (w watched) wait(ctx context.Context, p *poll) error {
	defer w.stop()
	t := time.NewTimer(p.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.heard.done:
	case <-w.ends.done:
	case <-t.C:
		p.delay = min(p.delay*2, p.most)
	}
	return w.e.checkOpen()
}

// StreamJSON is ReadStream (follow) or ReadStreamSoFar for tools: the
// values as JSON, opened when the engine seals payloads.
func (e *Engine) StreamJSON(ctx context.Context, runID, stream string, from int64, follow bool) iter.Seq2[Streamed[[]byte], error] {
	return func(yield func(Streamed[[]byte], error) bool) {
		for v, err := range e.readStream(ctx, runID, stream, from, follow) {
			if err != nil {
				yield(Streamed[[]byte]{}, err)
				return
			}
			raw, err := e.payloads.raw(fmt.Sprintf("value %d of stream %s of run %s", v.Offset, stream, runID), v.Value)
			if !yield(Streamed[[]byte]{Offset: v.Offset, Value: raw, WrittenAt: v.WrittenAt}, err) || err != nil {
				return
			}
		}
	}
}

// Streams returns the streams of run runID, by name.
func (e *Engine) Streams(ctx context.Context, runID string) ([]storage.StreamInfo, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	return e.store.ListStreams(ctx, runID)
}

// Updates returns the updates of run runID in the order the store
// accepted them, from after on (a Seq), at most limit (0: 100).
func (e *Engine) Updates(ctx context.Context, runID string, after int64, limit int) ([]storage.UpdateRecord, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	return e.store.ListUpdates(ctx, storage.UpdatesQuery{RunID: runID, After: after, Limit: limit})
}
