package enginetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/stemflow/stem/runtime"
)

var loopScenarios = []scenario{
	{"loops/sleeps of one name in a loop are keyed name, name#1, name#2, and a worker dying after any write hands the loop over where it was", testSleepLoop},
	{"loops/waits of one name in a loop take one event each in send order, and a worker dying after any write hands the loop over where it was", testWaitLoop},
	{"loops/a future released by a select keeps its event for the next future of its topic, or for itself when awaited again, across crashes and replays", testHandOver},
	{"loops/an event loop selecting between a future per topic takes 1000 events of two topics exactly once, in each topic's send order, then the checkout", testEventLoop},
}

// loopCase is one run of a loop scenario whose first worker dies right
// after its nth write lands (or finishes the run first, when it makes
// fewer writes).
type loopCase struct {
	id     string
	dying  *writeDyingStore
	engine *runtime.Engine
	stop   func()
}

// crashEach starts, for each n in 1..writes, a run on its own worker that
// dies right after its nth write; each run's workflow is registered, by
// register, under a name of its own, so that only its worker claims it.
// pump, called while they run, drives the runs from outside. Once every
// first worker died or finished, a survivor on the real store takes the
// runs over, and crashEach waits until every run is finished, pumping on.
//
// It returns the cases and an engine, not started, with every case's
// workflow registered, to read the runs with.
func crashEach(f *fixture, writes int, register func(e *runtime.Engine, workflow string), pump func(reader *runtime.Engine, cases []*loopCase)) ([]*loopCase, *runtime.Engine) {
	f.t.Helper()
	workflow := func(n int) string { return fmt.Sprintf("loop.%d", n) }
	all := func(e *runtime.Engine) {
		for n := 1; n <= writes; n++ {
			register(e, workflow(n))
		}
	}
	reader := f.engine(config{}, all) // reads and sends; never started
	var cases []*loopCase
	for n := 1; n <= writes; n++ {
		c := &loopCase{id: fmt.Sprintf("crash-after-%d", n)}
		c.dying = &writeDyingStore{dyingStore: dyingStore{Store: f.store}, after: int32(n)}
		c.engine = f.engine(config{lease: 300 * time.Millisecond, store: c.dying}, func(e *runtime.Engine) { register(e, workflow(n)) })
		_, err := runtime.Start[int, []int](f.ctx, c.engine, workflow(n), 0, runtime.WithID(c.id))
		f.must(err)
		c.stop = f.start(c.engine)
		cases = append(cases, c)
	}
	for _, c := range cases {
		f.eventually(c.id+"'s first worker died or finished", func() bool {
			pump(reader, cases)
			return c.dying.dead.Load() || f.info(reader, c.id).Status.Finished()
		})
		c.stop()
	}
	f.start(f.engine(config{lease: 300 * time.Millisecond}, all))
	for _, c := range cases {
		f.eventually(c.id+" completes", func() bool {
			pump(reader, cases)
			return f.info(reader, c.id).Status.Finished()
		})
	}
	return cases, reader
}

// checkLoop checks that run id completed with want and that its
// checkpoints, in execution order, have the keys wantKeys.
func checkLoop(f *fixture, reader *runtime.Engine, id string, want []int, wantKeys []string) []runtime.StepInfo {
	f.t.Helper()
	info := f.info(reader, id)
	if info.Status != runtime.StatusComplete {
		f.t.Fatalf("run %s is %s (%v), want complete", id, info.Status, info.Err)
	}
	var got []int
	f.must(json.Unmarshal(info.Output, &got))
	if !slices.Equal(got, want) {
		f.t.Fatalf("run %s returned %v, want %v", id, got, want)
	}
	steps := f.steps(reader, id, 0)
	var keys []string
	for _, s := range steps {
		keys = append(keys, s.Key)
	}
	if !slices.Equal(keys, wantKeys) {
		f.t.Fatalf("run %s has the checkpoints %v, want %v", id, keys, wantKeys)
	}
	return steps
}

// testSleepLoop: a loop of three sleeps of one name, with a step before
// each, keys them nap, nap#1, nap#2 — the first as a single sleep always
// was — each with its own wake time, later than the one before. A worker
// dies right after each write of the run in turn (the run then parked at
// the first, second or third sleep, or between them), and another worker
// takes the run over where it was: each step and sleep has one checkpoint,
// and none is slept under another's key.
func testSleepLoop(f *fixture) {
	register := func(e *runtime.Engine, workflow string) {
		f.must(runtime.Register(e, workflow, func(c *runtime.WorkflowContext, _ int) ([]int, error) {
			var done []int
			for i := range 3 {
				if err := runtime.Do(c, "tick@v1", runtime.StepOptions{Autoversion: true}, func(runtime.StepContext) error { return nil }); err != nil {
					return nil, err
				}
				if err := c.Sleep("nap", 20*time.Millisecond); err != nil {
					return nil, err
				}
				done = append(done, i)
			}
			return done, nil
		}))
	}
	// Writes: tick, nap, tick, nap, tick, nap, completion; the 8th case
	// does not crash.
	cases, reader := crashEach(f, 8, register, func(*runtime.Engine, []*loopCase) {})
	wantKeys := []string{"tick@v1#0", "nap", "tick@v1#1", "nap#1", "tick@v1#2", "nap#2"}
	for _, c := range cases {
		steps := checkLoop(f, reader, c.id, []int{0, 1, 2}, wantKeys)
		var last time.Time
		for _, s := range steps {
			if s.Kind != runtime.KindSleep {
				continue
			}
			var wake time.Time
			f.must(json.Unmarshal(s.Output, &wake))
			if !wake.After(last) {
				f.t.Fatalf("run %s: sleep %s wakes at %v, not after the sleep before it (%v): each sleep of the loop has its own wake time", c.id, s.Key, wake, last)
			}
			last = wake
		}
	}
}

// testWaitLoop: a loop of three waits of one name takes the events sent
// one by one, each once and in send order, under the keys item, item#1,
// item#2. A worker dies right after each write of the run in turn, and
// another takes the run over where it was: a run parked at the second
// wait gets the second event there.
func testWaitLoop(f *fixture) {
	register := func(e *runtime.Engine, workflow string) {
		f.must(runtime.Register(e, workflow, func(c *runtime.WorkflowContext, _ int) ([]int, error) {
			var got []int
			for range 3 {
				v, err := runtime.WaitForEvent[int](c, "item", "items", 0)
				if err != nil {
					return nil, err
				}
				got = append(got, v)
			}
			return got, nil
		}))
	}
	keys := []string{"item", "item#1", "item#2"}
	sent := map[string]int{}
	// pump sends a run its next event once the wait before has its own.
	pump := func(reader *runtime.Engine, cases []*loopCase) {
		for _, c := range cases {
			n := sent[c.id]
			if n == len(keys) {
				continue
			}
			if n > 0 {
				s := findStep(f.steps(reader, c.id, 0), keys[n-1])
				if s == nil || s.Status != runtime.StepComplete {
					continue
				}
			}
			f.must(reader.SendEvent(f.ctx, c.id, "items", 10*(n+1)))
			sent[c.id] = n + 1
		}
	}
	// Writes: three suspensions at the waits, the completion; the 5th
	// case does not crash.
	cases, reader := crashEach(f, 5, register, pump)
	for _, c := range cases {
		checkLoop(f, reader, c.id, []int{10, 20, 30}, keys)
	}
}

// cart is what the event loop of testEventLoop returns: the items of each
// topic in the order the workflow took them, and the checkout's payload.
type cart struct {
	Adds     []int `json:"adds"`
	Removes  []int `json:"removes"`
	Checkout int   `json:"checkout"`
}

// registerCart registers "cart": the usual event loop, each iteration
// creating a future per topic and selecting the first ready, until a
// checkout.
func registerCart(f *fixture, e *runtime.Engine) {
	f.must(runtime.Register(e, "cart", func(c *runtime.WorkflowContext, _ int) (cart, error) {
		var out cart
		for {
			add := runtime.OnEvent[int](c, "add", "cart.add")
			remove := runtime.OnEvent[int](c, "remove", "cart.remove")
			checkout := runtime.OnEvent[int](c, "checkout", "cart.checkout")
			i, err := runtime.Select(c, "next", add, remove, checkout)
			if err != nil {
				return out, err
			}
			switch i {
			case 0:
				v, err := add.Await()
				if err != nil {
					return out, err
				}
				out.Adds = append(out.Adds, v)
			case 1:
				v, err := remove.Await()
				if err != nil {
					return out, err
				}
				out.Removes = append(out.Removes, v)
			default:
				out.Checkout, err = checkout.Await()
				return out, err
			}
		}
	}))
}

// testEventLoop: an event loop that selects between a future per topic in
// each iteration takes every event exactly once, in the order each topic's
// were sent (the order the store keeps a run's events in), and ends at the
// checkout sent after them. The losing futures of each select let go of
// their topic, so the next iteration's futures get the later events. The
// events go in bursts as fast as one sender goes: the first of a burst
// reaches the run while it waits, the others are buffered before it waits
// again; the next burst goes once it does.
//
// Each event costs the run about three store commits (the send, the
// select's suspension, its checkpoint), so 1000 events take some 14 s on
// Postgres alone; the scenario has patience of its own, longer than the
// others'. Under the race detector it takes 250 events instead: each
// suspension stores the keys of every future the run created so far, so
// the n-th event's write grows with n, and SQLite in pure Go pays the
// detector for every byte (1000 events take over a minute there).
func testEventLoop(f *fixture) {
	events := 1000
	if raceDetector {
		events = 250
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := f.engine(config{}, func(e *runtime.Engine) { registerCart(f, e) })
	f.start(e)
	run, err := runtime.Start[int, cart](ctx, e, "cart", 0, runtime.WithID("cart"))
	f.must(err)
	seed := uint64(time.Now().UnixNano())
	f.t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 29))
	var want cart
	sent := make(chan error, 1)
	go func() {
		defer close(sent)
		order := rng.Perm(events)
		for len(order) > 0 {
			burst := min(len(order), 1+rng.IntN(64))
			for _, n := range order[:burst] {
				topic, items := "cart.add", &want.Adds
				if rng.IntN(2) == 0 {
					topic, items = "cart.remove", &want.Removes
				}
				*items = append(*items, n)
				if err := e.SendEvent(ctx, "cart", topic, n); err != nil {
					sent <- err
					return
				}
			}
			order = order[burst:]
			// A run parks only once it took every event buffered for it.
			for {
				info, err := e.Get(ctx, "cart")
				if err != nil {
					sent <- err
					return
				}
				if info.Status == runtime.StatusWaiting {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		sent <- e.SendEvent(ctx, "cart", "cart.checkout", events)
	}()
	f.must(<-sent)
	got, err := run.Result(ctx)
	f.must(err)
	if got.Checkout != events || !slices.Equal(got.Adds, want.Adds) || !slices.Equal(got.Removes, want.Removes) {
		f.t.Fatalf("the loop took %d adds, %d removes and checkout %d; want the %d adds and %d removes sent, each once and in send order, then checkout %d\ngot adds %v\nwant adds %v",
			len(got.Adds), len(got.Removes), got.Checkout, len(want.Adds), len(want.Removes), events, got.Adds, want.Adds)
	}
}

// testHandOver: futures that lose a select while holding their event
// (delivered while the run waited elsewhere) keep it for later: the next
// future of the topic created takes it, or the released future itself
// when it is awaited before any is; a released future whose event was
// taken waits for a new one. Each event is returned once. A future never
// awaited is no error. A worker dies right after each write of the run in
// turn; another takes the run over, and a replay of the finished run
// makes the same hand-overs.
func testHandOver(f *fixture) {
	register := func(e *runtime.Engine, workflow string) {
		f.must(runtime.Register(e, workflow, func(c *runtime.WorkflowContext, _ int) ([]int, error) {
			add := runtime.OnEvent[int](c, "add", "h.add")
			checkout := runtime.OnEvent[int](c, "checkout", "h.checkout")
			pick := runtime.OnEvent[int](c, "pick", "h.pick")
			runtime.OnEvent[int](c, "ignored", "h.ignored") // never awaited
			// While the run waits here, every future above gets its event.
			gate, err := runtime.WaitForEvent[int](c, "gate", "h.gate", 0)
			if err != nil {
				return nil, err
			}
			// All three are ready; the first wins, the others hold theirs.
			first, err := runtime.Select(c, "first", checkout, add, pick)
			if err != nil {
				return nil, err
			}
			out := []int{gate, first}
			var futures []*runtime.Future[int]
			for _, next := range []func() *runtime.Future[int]{
				func() *runtime.Future[int] { return runtime.OnEvent[int](c, "add", "h.add") }, // takes add's event
				func() *runtime.Future[int] { return pick },                                    // keeps its own
				func() *runtime.Future[int] { return runtime.OnEvent[int](c, "add", "h.add") }, // waits: add's was taken
				func() *runtime.Future[int] { return add },                                     // waits anew
				func() *runtime.Future[int] { return runtime.OnEvent[int](c, "pick", "h.pick") },
			} {
				fu := next()
				futures = append(futures, fu)
				v, err := fu.Await()
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, nil
		}))
	}
	sent := map[string]bool{}
	pump := func(reader *runtime.Engine, cases []*loopCase) {
		for _, c := range cases {
			if sent[c.id] {
				continue
			}
			sent[c.id] = true
			for _, ev := range []struct {
				topic string
				v     int
			}{{"h.ignored", -1}, {"h.add", 1}, {"h.checkout", 100}, {"h.pick", 7}, {"h.gate", 50}, {"h.add", 2}, {"h.add", 3}, {"h.pick", 8}} {
				f.must(reader.SendEvent(f.ctx, c.id, ev.topic, ev.v))
			}
		}
	}
	// Writes: at most four suspensions at the gate, the select, three
	// suspensions of the futures that wait, the completion; the last case
	// does not crash.
	cases, reader := crashEach(f, 10, register, pump)
	want := []int{50, 0, 1, 7, 2, 3, 8}
	var ids []string
	for _, c := range cases {
		info := f.info(reader, c.id)
		var got []int
		if info.Status == runtime.StatusComplete {
			f.must(json.Unmarshal(info.Output, &got))
		}
		if !slices.Equal(got, want) {
			f.t.Fatalf("run %s is %s with %v (%v), want %v: the gate, checkout winning, add's event taken over, pick's kept, then the later events in order", c.id, info.Status, got, info.Err, want)
		}
		ids = append(ids, c.id)
	}
	rep, err := reader.Replay(f.ctx, runtime.ReplayOptions{RunIDs: ids})
	f.must(err)
	if len(rep.Divergences) > 0 || rep.Replayed != len(ids) {
		f.t.Fatalf("replay of the finished runs: %+v, want each replayed without a divergence", rep)
	}
}
