package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// interactScenarios are the updates callers send to runs and the streams
// runs write for their readers, across crashes of either side.
var interactScenarios = []scenario{
	{"update/a caller retrying an update across a worker crash gets the one reply, handled once", testUpdateWorkerCrash},
	{"update/a caller that crashed and sends the update again gets the first reply", testUpdateCallerCrash},
	{"update/a refused update writes nothing, and the run goes on", testUpdateRefused},
	{"update/100 concurrent updates each get their own reply, in the order accepted", testUpdate100},
	{"update/updates to an ended run, or that the run never handles, fail with their errors", testUpdateEnded},
	{"update/an update taken but not replied to fails at a continue-as-new; one not taken reaches the next execution", testUpdateContinue},
	{"update/a paused run takes its update when resumed; a terminated one fails its callers", testUpdatePauseTerminate},
	{"update/a caller whose send's answer was lost sends again and the run handles it once", testUpdateLostAnswer},
	{"update/update-with-start creates the run or joins it, under the start policies", testUpdateOrStart},
	{"update/an operator's restart hands the updates the ended execution took and did not answer to the new one", testUpdateRestart},
	{"update/a deferred Fail replies the workflow's own declared error, which the caller matches with errors.Is", testUpdateDeferredFail},
	{"stream/10000 values reach two readers once and in order across a worker crash and a continue-as-new", testStream10000},
	{"stream/a workflow's own appends survive a worker crash without doubles", testStreamWorkflowAppends},
}

// errTooBig is the validator's refusal in the update scenarios.
var errTooBig = errors.New("amount too big")

// counter registers "counter": it takes "add" updates (requests are
// amounts), applies each with a step that counts its runs in applied, and
// replies the running total, until an update of 0 ends it with the total.
func counter(f *fixture, applied *atomic.Int32) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		f.must(runtime.RegisterUpdate[int, int](e, "add", func(n int) error {
			if n > 1000 {
				return fmt.Errorf("add %d: %w", n, errTooBig)
			}
			return nil
		}))
		f.must(runtime.Register(e, "counter", func(c *runtime.WorkflowContext, start int) (int, error) {
			total := start
			for {
				u, err := runtime.AwaitUpdate[int, int](c, "add", "add")
				if err != nil {
					return 0, err
				}
				if u.Request == 0 {
					if err := u.Reply(c, total); err != nil {
						return 0, err
					}
					return total, nil
				}
				total, err = runtime.Step(c, "apply", runtime.StepOptions{Autoversion: true}, func(sc runtime.StepContext) (int, error) {
					applied.Add(1)
					return total + u.Request, nil
				})
				if err != nil {
					return 0, err
				}
				if err := u.Reply(c, total); err != nil {
					return 0, err
				}
			}
		}))
	}
}

func testUpdateWorkerCrash(f *fixture) {
	var applied atomic.Int32
	// The first worker dies as its step's checkpoint lands, before the
	// reply is written; the second as the reply lands.
	for i, kill := range []func(storage.CheckpointRequest) bool{
		func(r storage.CheckpointRequest) bool { return r.Checkpoint.Kind == storage.KindStep },
		func(r storage.CheckpointRequest) bool { return r.Reply != nil },
	} {
		id := fmt.Sprintf("c%d", i)
		applied.Store(0)
		dying := &dyingStore{Store: f.store, killAfter: kill}
		a := f.engine(config{lease: 300 * time.Millisecond, store: dying}, counter(f, &applied))
		stopA := f.start(a)
		_, err := runtime.Start[int, int](f.ctx, a, "counter", 100, runtime.WithID(id))
		f.must(err)
		client := f.engine(config{}, counter(f, &applied))
		// The caller gives up on its first try while the worker dies.
		ctx, cancel := context.WithCancel(f.ctx)
		first := make(chan error, 1)
		go func() {
			_, err := runtime.CallUpdate[int](ctx, client, id, "add", 5, runtime.WithUpdateID("u1"))
			first <- err
		}()
		f.eventually("the first worker died", dying.dead.Load)
		cancel()
		<-first
		stopA()
		b := f.engine(config{lease: 300 * time.Millisecond}, counter(f, &applied))
		stopB := f.start(b)
		// The caller sends the same ID again until it has its reply.
		got, err := runtime.CallUpdate[int](f.ctx, client, id, "add", 5, runtime.WithUpdateID("u1"))
		f.must(err)
		if got != 105 {
			f.t.Fatalf("run %s: reply %d, want 105", id, got)
		}
		// Handled once: one checkpoint of the step that applied it (a
		// step may run again on a busy machine whose lease expired
		// before its checkpoint landed; its result is recorded once).
		applies := 0
		for _, st := range f.steps(b, id, 0) {
			if st.Kind == runtime.KindStep && strings.HasPrefix(st.Key, "apply") {
				applies++
			}
		}
		if applies != 1 || applied.Load() < 1 {
			f.t.Fatalf("run %s: %d checkpoints of the step that applies the update (it ran %d times), want one", id, applies, applied.Load())
		}
		// Once more: the reply is the stored one.
		if got, err := runtime.CallUpdate[int](f.ctx, client, id, "add", 5, runtime.WithUpdateID("u1")); err != nil || got != 105 {
			f.t.Fatalf("run %s: update sent a third time: %d, %v; want 105", id, got, err)
		}
		us, err := client.Updates(f.ctx, id, 0, 0)
		f.must(err)
		if len(us) != 1 || us[0].ID != "u1" || us[0].State != storage.UpdateReplied {
			f.t.Fatalf("run %s: updates %+v; want u1 replied, once", id, us)
		}
		if got, err := runtime.CallUpdate[int](f.ctx, client, id, "add", 0); err != nil || got != 105 {
			f.t.Fatalf("run %s: final update: %d, %v", id, got, err)
		}
		f.waitStatus(b, id, runtime.StatusComplete)
		stopB() // the next round's run is the next dying worker's
	}
}

func testUpdateCallerCrash(f *fixture) {
	var applied atomic.Int32
	e := f.engine(config{}, counter(f, &applied))
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "counter", 0, runtime.WithID("c"))
	f.must(err)
	// The caller's process dies right after sending: it never awaits.
	caller := f.engine(config{}, counter(f, &applied))
	h, err := caller.SendUpdate(f.ctx, "c", "add", 7, runtime.WithUpdateID("once"))
	f.must(err)
	if !h.Created {
		f.t.Fatal("the first send did not create the update")
	}
	f.must(caller.Close())
	f.eventually("the run handled the update", func() bool { return applied.Load() == 1 })
	// A new caller sends the same ID, with another request even: the
	// first request's reply comes back, and nothing is handled again.
	again := f.engine(config{}, counter(f, &applied))
	got, err := runtime.CallUpdate[int](f.ctx, again, "c", "add", 9, runtime.WithUpdateID("once"))
	f.must(err)
	if got != 7 || applied.Load() != 1 {
		f.t.Fatalf("resent update: reply %d, applied %d times; want 7, once", got, applied.Load())
	}
}

func testUpdateRefused(f *fixture) {
	var applied atomic.Int32
	e := f.engine(config{}, counter(f, &applied))
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "counter", 0, runtime.WithID("c"))
	f.must(err)
	f.waitStatus(e, "c", runtime.StatusWaiting)
	_, err = runtime.CallUpdate[int](f.ctx, e, "c", "add", 5000, runtime.WithUpdateID("big"))
	if !errors.Is(err, runtime.ErrUpdateRefused) || !errors.Is(err, errTooBig) {
		f.t.Fatalf("refused update: %v; want ErrUpdateRefused and the validator's error", err)
	}
	if us, err := e.Updates(f.ctx, "c", 0, 0); err != nil || len(us) != 0 {
		f.t.Fatalf("a refused update was recorded: %+v, %v", us, err)
	}
	if _, err := e.AwaitUpdate(f.ctx, runtime.UpdateHandle{RunID: "c", ID: "big"}); !errors.Is(err, runtime.ErrUpdateNotFound) {
		f.t.Fatalf("await of a refused update: %v; want ErrUpdateNotFound", err)
	}
	// A request the update's type would not decode is refused too.
	if _, err := e.SendUpdate(f.ctx, "c", "add", "five"); !errors.Is(err, runtime.ErrInvalidArgument) {
		f.t.Fatalf("update with a request of the wrong type: %v; want ErrInvalidArgument", err)
	}
	for _, s := range f.steps(e, "c", 0) {
		if s.Status != runtime.StepWaiting && (s.Kind == runtime.KindUpdate || s.Kind == runtime.KindReply) {
			f.t.Fatalf("history holds %s after refusals only", s.Key)
		}
	}
	// The ID refused is free, and the run goes on.
	if got, err := runtime.CallUpdate[int](f.ctx, e, "c", "add", 3, runtime.WithUpdateID("big")); err != nil || got != 3 {
		f.t.Fatalf("update after refusals: %d, %v; want 3", got, err)
	}
	if applied.Load() != 1 {
		f.t.Fatalf("applied %d times, want once", applied.Load())
	}
}

func testUpdate100(f *fixture) {
	const n = 100
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.RegisterUpdate[int, [2]int](e, "take", nil))
		f.must(runtime.Register(e, "taker", func(c *runtime.WorkflowContext, _ int) (int, error) {
			for i := 1; i <= n; i++ {
				u, err := runtime.AwaitUpdate[int, [2]int](c, "take", "take")
				if err != nil {
					return 0, err
				}
				// The reply says which update it answers and in what turn.
				if err := u.Reply(c, [2]int{u.Request, i}); err != nil {
					return 0, err
				}
			}
			return n, nil
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "taker", 0, runtime.WithID("t"))
	f.must(err)
	replies := make([][2]int, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			r, err := runtime.CallUpdate[[2]int](f.ctx, e, "t", "take", i, runtime.WithUpdateID(fmt.Sprintf("u%03d", i)))
			if err != nil {
				errs <- err
				return
			}
			replies[i] = r
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
	turns := make([]int, 0, n)
	for i, r := range replies {
		if r[0] != i {
			f.t.Fatalf("caller %d got the reply to request %d", i, r[0])
		}
		turns = append(turns, r[1])
	}
	slices.Sort(turns)
	for i, t := range turns {
		if t != i+1 {
			f.t.Fatalf("turns %v: want each of 1..%d once", turns, n)
		}
	}
	// Handled in the order accepted: the update of Seq k got turn k.
	us, err := e.Updates(f.ctx, "t", 0, 0)
	f.must(err)
	if len(us) != n {
		f.t.Fatalf("%d updates recorded, want %d", len(us), n)
	}
	for _, u := range us {
		var i int
		if _, err := fmt.Sscanf(u.ID, "u%03d", &i); err != nil {
			f.t.Fatal(err)
		}
		if replies[i][1] != int(u.Seq) {
			f.t.Fatalf("update %s (seq %d) was handled in turn %d", u.ID, u.Seq, replies[i][1])
		}
	}
	f.waitStatus(e, "t", runtime.StatusComplete)
}

func testUpdateEnded(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		blockUntilEvent(f, e)
		f.must(runtime.RegisterUpdate[int, int](e, "never", nil))
	})
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "hold", 1, runtime.WithID("h"))
	f.must(err)
	f.waitStatus(e, "h", runtime.StatusWaiting)
	// Sent while the run waits for something else; it ends without
	// taking it.
	h, err := e.SendUpdate(f.ctx, "h", "never", 1, runtime.WithUpdateID("lost"))
	f.must(err)
	done := make(chan error, 1)
	go func() {
		_, err := runtime.AwaitReply[int](f.ctx, e, h)
		done <- err
	}()
	f.must(e.SendEvent(f.ctx, "h", "test.go", 1))
	if err := <-done; !errors.Is(err, runtime.ErrUpdateUnhandled) {
		f.t.Fatalf("update the run never handled: %v; want ErrUpdateUnhandled", err)
	}
	f.waitStatus(e, "h", runtime.StatusComplete)
	if _, err := e.SendUpdate(f.ctx, "h", "never", 1); !errors.Is(err, runtime.ErrUpdateRunEnded) {
		f.t.Fatalf("update to an ended run: %v; want ErrUpdateRunEnded", err)
	}
	// The ended run's own update is still found under its ID.
	h2, err := e.SendUpdate(f.ctx, "h", "never", 1, runtime.WithUpdateID("lost"))
	if err != nil || h2.Created {
		f.t.Fatalf("resend of an ended run's update: %+v, %v; want its handle", h2, err)
	}
	if _, err := runtime.CallUpdate[int](f.ctx, e, "nobody", "never", 1); !errors.Is(err, runtime.ErrRunNotFound) {
		f.t.Fatalf("update to an unknown run: %v; want ErrRunNotFound", err)
	}
}

// producer registers "producer": it writes batches of 1000 values, each
// a step that appends them (AppendInStep), values equal to their offsets,
// continuing as new after half of them, and closes the stream after the
// last. ran counts the steps' attempts.
func producer(f *fixture, batches int, ran *atomic.Int32) func(e *runtime.Engine) {
	return func(e *runtime.Engine) {
		f.must(runtime.Register(e, "producer", func(c *runtime.WorkflowContext, from int) (int, error) {
			for b := from; b < batches; b++ {
				if b == batches/2 && from < b {
					return 0, runtime.ContinueAsNew(c, b)
				}
				_, err := runtime.Step(c, fmt.Sprintf("batch-%d", b), runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
					ran.Add(1)
					for i := range 1000 {
						if err := runtime.AppendInStep(sc, "out", b*1000+i); err != nil {
							return 0, err
						}
					}
					return b, nil
				})
				if err != nil {
					return 0, err
				}
			}
			return batches * 1000, runtime.CloseStream(c, "out")
		}))
	}
}

// readAll reads the run's stream "out" from offset from, up to stop
// values (0: all), checking each is its offset.
func readAll(f *fixture, e *runtime.Engine, id string, from int64, stop int) (next int64, n int, err error) {
	next = from
	for v, err := range runtime.ReadStream[int](f.ctx, e, id, "out", from) {
		if err != nil {
			return next, n, err
		}
		if v.Offset != next || int64(v.Value) != v.Offset {
			return next, n, fmt.Errorf("read offset %d value %d where offset %d was next", v.Offset, v.Value, next)
		}
		next, n = v.Offset+1, n+1
		if stop > 0 && n == stop {
			return next, n, nil
		}
	}
	return next, n, nil
}

func testStream10000(f *fixture) {
	const batches = 10
	var ran atomic.Int32
	var lands atomic.Int32
	// The first worker dies as its third batch's checkpoint lands.
	dying := &dyingStore{Store: f.store, killAfter: func(r storage.CheckpointRequest) bool {
		return len(r.Streams) > 0 && lands.Add(1) == 3
	}}
	a := f.engine(config{lease: 300 * time.Millisecond, store: dying}, producer(f, batches, &ran))
	stopA := f.start(a)
	reader := f.engine(config{}, producer(f, batches, &ran))
	_, err := runtime.Start[int, int](f.ctx, a, "producer", 0, runtime.WithID("p"))
	f.must(err)
	type result struct {
		n   int
		err error
	}
	whole := make(chan result, 1)
	go func() {
		next, n, err := readAll(f, reader, "p", 0, 0)
		if err == nil && next != batches*1000 {
			err = fmt.Errorf("the whole read ended at offset %d", next)
		}
		whole <- result{n, err}
	}()
	// The second reader leaves after 2500 values and comes back from
	// where it was.
	next, n1, err := readAll(f, reader, "p", 0, 2500)
	f.must(err)
	// A read of what is written so far ends at its end, though the run
	// goes on writing.
	var soFar int64
	for v, err := range runtime.ReadStreamSoFar[int](f.ctx, reader, "p", "out", 0) {
		f.must(err)
		if v.Offset != soFar || int64(v.Value) != v.Offset {
			f.t.Fatalf("read so far: offset %d value %d where %d was next", v.Offset, v.Value, soFar)
		}
		soFar++
	}
	if soFar < 2500 {
		f.t.Fatalf("read so far %d values, after another reader had 2500", soFar)
	}
	f.eventually("the first worker died", dying.dead.Load)
	stopA()
	b := f.engine(config{lease: 300 * time.Millisecond}, producer(f, batches, &ran))
	f.start(b)
	end, n2, err := readAll(f, reader, "p", next, 0)
	f.must(err)
	if n1+n2 != batches*1000 || end != batches*1000 {
		f.t.Fatalf("resumed reader read %d+%d values, to offset %d; want %d", n1, n2, end, batches*1000)
	}
	r := <-whole
	f.must(r.err)
	if r.n != batches*1000 {
		f.t.Fatalf("whole reader read %d values", r.n)
	}
	info := f.waitStatus(b, "p", runtime.StatusComplete)
	if info.Execution != 2 {
		f.t.Fatalf("run in execution %d, want 2 (one continue-as-new)", info.Execution)
	}
	// Every batch ran, and the readers saw each value once: a batch that
	// ran again (a lease that expired on a busy machine, the dying
	// worker's batch that did not land) appended nothing twice.
	if got := ran.Load(); got < batches {
		f.t.Fatalf("batches ran %d times, want at least %d", got, batches)
	}
	ss, err := b.Streams(f.ctx, "p")
	f.must(err)
	if len(ss) != 1 || ss[0].Name != "out" || ss[0].Length != batches*1000 || !ss[0].Closed {
		f.t.Fatalf("streams %+v; want out, %d values, closed", ss, batches*1000)
	}
}

func testStreamWorkflowAppends(f *fixture) {
	const n = 50
	register := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "appender", func(c *runtime.WorkflowContext, _ int) (int, error) {
			for i := range n {
				if err := runtime.Append(c, "out", i); err != nil {
					return 0, err
				}
			}
			return n, nil
		}))
	}
	var lands atomic.Int32
	dying := &dyingStore{Store: f.store, killAfter: func(r storage.CheckpointRequest) bool {
		return len(r.Streams) > 0 && lands.Add(1) == n/2
	}}
	a := f.engine(config{lease: 300 * time.Millisecond, store: dying}, register)
	stopA := f.start(a)
	_, err := runtime.Start[int, int](f.ctx, a, "appender", 0, runtime.WithID("w"))
	f.must(err)
	f.eventually("the first worker died", dying.dead.Load)
	stopA()
	b := f.engine(config{lease: 300 * time.Millisecond}, register)
	f.start(b)
	f.waitStatus(b, "w", runtime.StatusComplete)
	// The run ended, so the read ends at the stream's end, unclosed.
	end, got, err := readAll(f, b, "w", 0, 0)
	f.must(err)
	if got != n || end != n {
		f.t.Fatalf("read %d values to offset %d; want %d", got, end, n)
	}
}

func testUpdateContinue(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.RegisterUpdate[int, int](e, "ask", nil))
		f.must(runtime.Register(e, "forgetful", func(c *runtime.WorkflowContext, round int) (int, error) {
			u, err := runtime.AwaitUpdate[int, int](c, "ask", "ask")
			if err != nil {
				return 0, err
			}
			if round == 0 {
				// Takes the update, never replies, and continues as new
				// once told to.
				if _, err := runtime.WaitForEvent[int](c, "go", "test.go", 0); err != nil {
					return 0, err
				}
				return 0, runtime.ContinueAsNew(c, 1)
			}
			return u.Request, u.Reply(c, u.Request*10)
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "forgetful", 0, runtime.WithID("f"))
	f.must(err)
	first, err := e.SendUpdate(f.ctx, "f", "ask", 1, runtime.WithUpdateID("first"))
	f.must(err)
	f.eventually("the first update is taken", func() bool {
		return slices.ContainsFunc(f.steps(e, "f", 0), func(s runtime.StepInfo) bool {
			return s.Kind == runtime.KindUpdate && s.Status == runtime.StepComplete
		})
	})
	second, err := e.SendUpdate(f.ctx, "f", "ask", 2, runtime.WithUpdateID("second"))
	f.must(err)
	f.must(e.SendEvent(f.ctx, "f", "test.go", 1))
	if _, err := runtime.AwaitReply[int](f.ctx, e, first); !errors.Is(err, runtime.ErrUpdateUnhandled) {
		f.t.Fatalf("update taken before the continue-as-new: %v; want ErrUpdateUnhandled", err)
	}
	if got, err := runtime.AwaitReply[int](f.ctx, e, second); err != nil || got != 20 {
		f.t.Fatalf("update buffered across the continue-as-new: %d, %v; want 20", got, err)
	}
	f.waitStatus(e, "f", runtime.StatusComplete)
}

func testUpdatePauseTerminate(f *fixture) {
	var applied atomic.Int32
	e := f.engine(config{}, counter(f, &applied))
	f.start(e)
	for _, id := range []string{"p", "t"} {
		_, err := runtime.Start[int, int](f.ctx, e, "counter", 0, runtime.WithID(id))
		f.must(err)
		f.waitStatus(e, id, runtime.StatusWaiting)
		f.must(e.Pause(f.ctx, id))
	}
	// Paused: the update is recorded and waits for the resume.
	h, err := e.SendUpdate(f.ctx, "p", "add", 4)
	f.must(err)
	if info := f.info(e, "p"); info.Status != runtime.StatusPaused {
		f.t.Fatalf("an update resumed a paused run: %s", info.Status)
	}
	f.must(e.Resume(f.ctx, "p"))
	if got, err := runtime.AwaitReply[int](f.ctx, e, h); err != nil || got != 4 {
		f.t.Fatalf("update to a resumed run: %d, %v; want 4", got, err)
	}
	// Terminated with an update pending: its caller hears it.
	h, err = e.SendUpdate(f.ctx, "t", "add", 4)
	f.must(err)
	done := make(chan error, 1)
	go func() {
		_, err := runtime.AwaitReply[int](f.ctx, e, h)
		done <- err
	}()
	f.must(e.Terminate(f.ctx, "t", "enough"))
	if err := <-done; !errors.Is(err, runtime.ErrUpdateUnhandled) {
		f.t.Fatalf("update to a run terminated before taking it: %v; want ErrUpdateUnhandled", err)
	}
}

// lossyStore loses the answer of its first SendUpdate: the update is
// recorded, and the caller hears an error.
type lossyStore struct {
	storage.Store
	lost atomic.Bool
}

func (l *lossyStore) SendUpdate(ctx context.Context, req storage.UpdateRequest) (storage.UpdateResult, error) {
	res, err := l.Store.SendUpdate(ctx, req)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return storage.UpdateResult{}, errDead
	}
	return res, err
}

func testUpdateLostAnswer(f *fixture) {
	var applied atomic.Int32
	e := f.engine(config{}, counter(f, &applied))
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "counter", 0, runtime.WithID("c"))
	f.must(err)
	caller := f.engine(config{store: &lossyStore{Store: f.store}}, counter(f, &applied))
	if _, err := runtime.CallUpdate[int](f.ctx, caller, "c", "add", 6, runtime.WithUpdateID("once")); !errors.Is(err, errDead) {
		f.t.Fatalf("first send: %v; want the lost answer's error", err)
	}
	got, err := runtime.CallUpdate[int](f.ctx, caller, "c", "add", 6, runtime.WithUpdateID("once"))
	if err != nil || got != 6 || applied.Load() != 1 {
		f.t.Fatalf("send again: %d, %v, applied %d times; want 6, once", got, err, applied.Load())
	}
}

func testUpdateOrStart(f *fixture) {
	var applied atomic.Int32
	e := f.engine(config{}, counter(f, &applied))
	f.start(e)
	// No run yet: it is started with the input, then takes the update.
	got, err := runtime.UpdateOrStart[int, int, int](f.ctx, e, "counter", "u", 100, "add", "first", 5)
	if err != nil || got != 105 {
		f.t.Fatalf("update-with-start of a new run: %d, %v; want 105", got, err)
	}
	// The run exists: joined, its input untouched.
	got, err = runtime.UpdateOrStart[int, int, int](f.ctx, e, "counter", "u", 999, "add", "second", 1)
	if err != nil || got != 106 {
		f.t.Fatalf("update-with-start of an existing run: %d, %v; want 106", got, err)
	}
	// A policy that refuses the start sends no update.
	_, err = runtime.UpdateOrStart[int, int, int](f.ctx, e, "counter", "u", 0, "add", "third", 1, runtime.IfExists(runtime.ExistingFail))
	if !errors.Is(err, runtime.ErrStartRefused) {
		f.t.Fatalf("update-with-start refused by its policy: %v; want ErrStartRefused", err)
	}
	// A refused request starts nothing.
	if _, err := runtime.UpdateOrStart[int, int, int](f.ctx, e, "counter", "v", 0, "add", "", 5000); !errors.Is(err, runtime.ErrUpdateRefused) {
		f.t.Fatalf("update-with-start with a request its validator refuses: %v; want ErrUpdateRefused", err)
	}
	if _, err := e.Get(f.ctx, "v"); !errors.Is(err, runtime.ErrRunNotFound) {
		f.t.Fatalf("a refused update-with-start started its run: %v", err)
	}
	// So does a malformed update ID, refused before the start too.
	if _, err := runtime.UpdateOrStart[int, int, int](f.ctx, e, "counter", "w", 0, "add", "bad\u202eid", 1); !errors.Is(err, runtime.ErrInvalidArgument) {
		f.t.Fatalf("update-with-start with a malformed update ID: %v; want ErrInvalidArgument", err)
	}
	if _, err := e.Get(f.ctx, "w"); !errors.Is(err, runtime.ErrRunNotFound) {
		f.t.Fatalf("an update-with-start with a malformed update ID started its run: %v", err)
	}
	us, err := e.Updates(f.ctx, "u", 0, 0)
	f.must(err)
	if len(us) != 2 || applied.Load() != 2 {
		f.t.Fatalf("%d updates recorded, applied %d times; want 2 and 2", len(us), applied.Load())
	}
}

func testUpdateRestart(f *fixture) {
	var taken atomic.Int32
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.RegisterUpdate[int, int](e, "ask", nil))
		f.must(runtime.Register(e, "slow", func(c *runtime.WorkflowContext, _ int) (int, error) {
			u, err := runtime.AwaitUpdate[int, int](c, "ask", "ask")
			if err != nil {
				return 0, err
			}
			if _, err := runtime.Step(c, "note", runtime.StepOptions{}, func(runtime.StepContext) (int, error) {
				return int(taken.Add(1)), nil
			}); err != nil {
				return 0, err
			}
			if _, err := runtime.WaitForEvent[int](c, "go", "test.go", 0); err != nil {
				return 0, err
			}
			return 0, u.Reply(c, u.Request+1)
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "slow", 0, runtime.WithID("s"))
	f.must(err)
	h, err := e.SendUpdate(f.ctx, "s", "ask", 41)
	f.must(err)
	f.eventually("the update is taken", func() bool { return taken.Load() == 1 })
	f.waitStatus(e, "s", runtime.StatusWaiting)
	f.must(e.Restart(f.ctx, "s"))
	f.eventually("the new execution takes the update again", func() bool { return taken.Load() == 2 })
	f.must(e.SendEvent(f.ctx, "s", "test.go", 1))
	if got, err := runtime.AwaitReply[int](f.ctx, e, h); err != nil || got != 42 {
		f.t.Fatalf("update across a restart: %d, %v; want 42", got, err)
	}
}

// errOutOfStock is a user's own error, declared so it keeps its identity
// through the store.
var errOutOfStock = errors.New("out of stock")

func init() { runtime.DeclareError("enginetest.out_of_stock", errOutOfStock) }

func testUpdateDeferredFail(f *fixture) {
	e := f.engine(config{}, func(e *runtime.Engine) {
		f.must(runtime.RegisterUpdate[[]int, int](e, "order", nil))
		f.must(runtime.Register(e, "shop", func(c *runtime.WorkflowContext, stock int) (total int, err error) {
			u, err := runtime.AwaitUpdate[[]int, int](c, "order", "order")
			if err != nil {
				return 0, err
			}
			// Whatever way the workflow ends, the caller hears of it.
			defer func() {
				if err != nil {
					_ = u.Fail(c, err)
				}
			}()
			for i, qty := range u.Request {
				left, err := runtime.Step(c, "take", runtime.StepOptions{Autoversion: true}, func(runtime.StepContext) (int, error) {
					return stock - qty, nil
				})
				if err != nil {
					return 0, err
				}
				if left < 0 {
					return 0, fmt.Errorf("line %d: %w", i, errOutOfStock)
				}
				stock, total = left, total+qty
			}
			return total, u.Reply(c, total)
		}))
	})
	f.start(e)
	_, err := runtime.Start[int, int](f.ctx, e, "shop", 5, runtime.WithID("s"))
	f.must(err)
	_, err = runtime.CallUpdate[int](f.ctx, e, "s", "order", []int{2, 2, 2})
	if !errors.Is(err, errOutOfStock) {
		f.t.Fatalf("update the workflow failed with its own error: %v; want errOutOfStock", err)
	}
	if info := f.waitStatus(e, "s", runtime.StatusErrored); !errors.Is(info.Err, errOutOfStock) || !strings.Contains(info.Err.Error(), "line 2") {
		f.t.Fatalf("run ended with %v; want errOutOfStock at line 2", info.Err)
	}
}
