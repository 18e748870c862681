package stemtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stemflow/stem/runtime"
)

// Updates and streams in a test: a test sends an update at a virtual time,
// as the outside world would, and asserts on the workflow's reply
// (UpdateAt); it reads what a run wrote to a stream so far, or follows
// the stream to its end (StreamSoFar, FollowStream). All of them go on
// across CrashEveryStep's replacement of a killed worker: a reply or a
// stream read on the killed worker's engine is read again on the fresh
// one's.

// Reply is an update UpdateAt sends at a virtual time: the workflow's
// reply to it, once there is one, to assert on.
type Reply[Rep any] struct {
	done chan struct{}
	// Set before done is closed.
	handle            runtime.UpdateHandle
	sentAt, repliedAt time.Time
	rep               Rep
	err               error
}

// UpdateAt sends the update name with request req to run runID when the
// virtual clock reads d past now (at once when d <= 0), in order with the
// runs' own timers, as At would, and then awaits the reply: the returned
// Reply gives it, decoded into Rep, or the error, to assert on. The
// update is sent as runtime.SendUpdate sends it (opts give it an ID,
// say), checked against its request type and validator first, and the
// reply read as runtime.AwaitReply reads it: a validator's refusal
// matches runtime.ErrUpdateRefused, a reply with Update.Fail the
// workflow's error, a run that ends without replying
// runtime.ErrUpdateUnhandled.
//
// The update's ID is, unless opts give one, "stemtest-<name>-<n>", n
// counting the env's UpdateAt calls from 1: the same in every case of
// CrashEveryStep (a reply's checkpoint is keyed by the update's ID), as
// the kit's seeded Random is.
func UpdateAt[Rep any](env *Env, d time.Duration, runID, name string, req any, opts ...runtime.UpdateOption) *Reply[Rep] {
	id := fmt.Sprintf("stemtest-%s-%d", name, env.updates.Add(1))
	opts = append([]runtime.UpdateOption{runtime.WithUpdateID(id)}, opts...)
	r := &Reply[Rep]{done: make(chan struct{}), sentAt: env.Clock.Now().Add(max(d, 0))}
	env.At(d, func() {
		r.handle, r.err = env.Engine.SendUpdate(env.ctx, runID, name, req, opts...)
		if r.err != nil {
			close(r.done)
			return
		}
		// Awaited on a goroutine of its own, outside At's hold on the
		// engine, which a crash test must be free to replace meanwhile.
		go func() {
			defer close(r.done)
			r.err = env.onLive(func(ctx context.Context, e *runtime.Engine) error {
				u, err := e.AwaitUpdate(ctx, r.handle)
				if err != nil {
					return err
				}
				if u.RepliedAt != nil {
					r.repliedAt = *u.RepliedAt
				}
				r.rep, err = runtime.AwaitReply[Rep](ctx, e, r.handle)
				return err
			})
		}()
	})
	return r
}

// Wait waits for the reply and returns it, decoded into Rep, or the error
// the update was refused or failed with. It waits at most until the
// test's Context ends.
func (r *Reply[Rep]) Wait() (Rep, error) {
	<-r.done
	return r.rep, r.err
}

// Done is closed once the reply or the error is in.
func (r *Reply[Rep]) Done() <-chan struct{} { return r.done }

// Handle is the update's handle, its ID and run, once it was sent (zero
// when it was refused).
func (r *Reply[Rep]) Handle() runtime.UpdateHandle {
	<-r.done
	return r.handle
}

// SentAt is the virtual time the update was sent at: d past the time
// UpdateAt was called.
func (r *Reply[Rep]) SentAt() time.Time { return r.sentAt }

// RepliedAt is the virtual time the store recorded the reply at (zero
// without a reply): later than SentAt when the workflow took the update
// only after a sleep, say.
func (r *Reply[Rep]) RepliedAt() time.Time {
	<-r.done
	return r.repliedAt
}

// StreamSoFar returns the values run runID has written to its stream
// named stream so far, decoded into T, in order, with the virtual time
// each was written at; it does not wait for more (see FollowStream). A
// stream never written to has none. Call it from At to read the stream at
// a virtual time.
func StreamSoFar[T any](env *Env, runID, stream string) ([]runtime.Streamed[T], error) {
	var out []runtime.Streamed[T]
	err := env.onLive(func(ctx context.Context, e *runtime.Engine) error {
		out = out[:0]
		for v, err := range runtime.ReadStreamSoFar[T](ctx, e, runID, stream, 0) {
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// FollowStream returns every value run runID writes to its stream named
// stream, decoded into T, in order, with the virtual time each was
// written at: it waits for more as the run goes on (the clock moving as
// it does), and returns once the stream is closed or the run has ended.
// It waits at most until the test's Context ends, and returns what it
// read with that error.
func FollowStream[T any](env *Env, runID, stream string) ([]runtime.Streamed[T], error) {
	var out []runtime.Streamed[T]
	err := env.onLive(func(ctx context.Context, e *runtime.Engine) error {
		var from int64
		if n := len(out); n > 0 {
			from = out[n-1].Offset + 1
		}
		for v, err := range runtime.ReadStream[T](ctx, e, runID, stream, from) {
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// Values returns the values of s, for comparing with those a test
// expects.
func Values[T any](s []runtime.Streamed[T]) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[i] = v.Value
	}
	return out
}

// onLive calls f with the env's engine and a context that ends when a
// crash test replaces that engine, and calls it again with the fresh
// engine when one did: f resumes what the killed worker's engine was
// reading. It returns f's error otherwise, or the test Context's.
func (env *Env) onLive(f func(ctx context.Context, e *runtime.Engine) error) error {
	for {
		env.mu.Lock()
		e, swapped := env.Engine, env.swapped
		env.mu.Unlock()
		ctx, cancel := context.WithCancel(env.ctx)
		go func() {
			select {
			case <-swapped:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := f(ctx, e)
		cancel()
		if err == nil || env.ctx.Err() != nil {
			return err
		}
		if errors.Is(err, runtime.ErrClosed) {
			// The engine stopped: a crash test is replacing it, or the
			// test is ending.
			select {
			case <-swapped:
			case <-env.ctx.Done():
				return err
			}
		}
		select {
		case <-swapped:
			continue
		default:
			return err
		}
	}
}
