package enginetest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/runtime"
)

var determScenarios = []scenario{
	{"DeterministicHelpersAcrossCrash", testDeterministicHelpersAcrossCrash},
}

// determOut is what the helpers' workflow returns: every value it drew.
type determOut struct {
	Now0, Now1 time.Time
	Random     uint64
	UUID       string
	Token      string
}

// determSeen records, by run, each value the workflow's code was handed,
// on every worker and every invocation.
type determSeen struct {
	mu      sync.Mutex
	values  map[string][]string
	effects map[string]int
}

func (s *determSeen) saw(run, what string, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[run] = append(s.values[run], what+"="+fmt.Sprint(v))
}

func (s *determSeen) effect(run string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.effects[run]++
	return s.effects[run]
}

// registerDeterm registers, as name, a workflow that draws with each
// helper and records what it was handed.
func registerDeterm(f *fixture, e *runtime.Engine, name string, seen *determSeen) {
	f.must(runtime.Register(e, name, func(c *runtime.WorkflowContext, _ int) (determOut, error) {
		id := c.RunID()
		var out determOut
		out.Now0 = c.Now()
		seen.saw(id, "now0", out.Now0.UnixNano())
		out.Random = c.Random()
		seen.saw(id, "random", out.Random)
		out.UUID = c.UUID()
		seen.saw(id, "uuid", out.UUID)
		token, err := runtime.SideEffect(c, "token", func() (string, error) {
			return fmt.Sprintf("token-%s-%d", id, seen.effect(id)), nil
		})
		if err != nil {
			return out, err
		}
		out.Token = token
		seen.saw(id, "token", out.Token)
		out.Now1 = c.Now()
		seen.saw(id, "now1", out.Now1.UnixNano())
		return out, nil
	}))
}

// testDeterministicHelpersAcrossCrash: the worker dies right after each
// of the run's writes in turn (the helpers' five checkpoints and the
// completion), and another takes the run over; every value the code was
// handed, before the crash and after, is the one the run returns, and
// SideEffect's function ran once.
func testDeterministicHelpersAcrossCrash(f *fixture) {
	const writes = 6
	seen := &determSeen{values: map[string][]string{}, effects: map[string]int{}}
	type crashCase struct {
		id, workflow string
		dying        *writeDyingStore
		engine       *runtime.Engine
		stop         func()
	}
	var cases []*crashCase
	for n := 1; n <= writes; n++ {
		c := &crashCase{id: fmt.Sprintf("determ-%d", n), workflow: fmt.Sprintf("determ.%d", n)}
		c.dying = &writeDyingStore{dyingStore: dyingStore{Store: f.store}, after: int32(n)}
		c.engine = f.engine(config{lease: time.Second, store: c.dying}, func(e *runtime.Engine) { registerDeterm(f, e, c.workflow, seen) })
		_, err := runtime.Start[int, determOut](f.ctx, c.engine, c.workflow, 0, runtime.WithID(c.id))
		f.must(err)
		c.stop = f.start(c.engine)
		cases = append(cases, c)
	}
	for _, c := range cases {
		f.eventually(c.id+"'s first worker died or finished", func() bool {
			return c.dying.dead.Load() || f.info(c.engine, c.id).Status.Finished()
		})
		c.stop()
	}
	before := map[string]int{}
	seen.mu.Lock()
	for _, c := range cases {
		before[c.id] = len(seen.values[c.id])
	}
	seen.mu.Unlock()
	survivor := f.engine(config{}, func(e *runtime.Engine) {
		for _, c := range cases {
			registerDeterm(f, e, c.workflow, seen)
		}
	})
	f.start(survivor)
	for _, c := range cases {
		run, err := runtime.Get[determOut](f.ctx, survivor, c.workflow, c.id)
		f.must(err)
		out, err := run.Result(f.ctx)
		if err != nil {
			f.t.Errorf("%s: %v", c.id, err)
			continue
		}
		want := map[string]string{
			"now0": fmt.Sprint(out.Now0.UnixNano()), "random": fmt.Sprint(out.Random), "uuid": out.UUID,
			"token": out.Token, "now1": fmt.Sprint(out.Now1.UnixNano()),
		}
		seen.mu.Lock()
		values, effects := seen.values[c.id], seen.effects[c.id]
		seen.mu.Unlock()
		// The first worker was handed a value for each write before the
		// one it died after (the completion follows the five values).
		if got, min := before[c.id], min(int(c.dying.after)-1, 5); got < min {
			f.t.Errorf("%s: the first worker was handed %d values before it died, want at least %d", c.id, got, min)
		}
		for _, v := range values {
			what, val, _ := strings.Cut(v, "=")
			if want[what] != val {
				f.t.Errorf("%s: the code was handed %s=%s, the run returned %s", c.id, what, val, want[what])
			}
		}
		if effects != 1 {
			f.t.Errorf("%s: SideEffect's function ran %d times, want once", c.id, effects)
		}
		if out.Now1.Before(out.Now0) || out.UUID == "" {
			f.t.Errorf("%s: returned %+v", c.id, out)
		}
	}
}
