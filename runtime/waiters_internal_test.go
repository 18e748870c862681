package runtime

import "testing"

// TestWaitersWakeOnlyTheirRun: ending a run wakes the callers waiting on
// it and no other; a caller that waits again after a wake-up gets a fresh
// wait; the set forgets a run once nobody waits on it.
func TestWaitersWakeOnlyTheirRun(t *testing.T) {
	var w waiters
	a1, a2, b := w.add("a"), w.add("a"), w.add("b")
	if a1 != a2 {
		t.Fatal("two callers waiting on one run got different waits")
	}
	w.wake("a", "unknown")
	for _, rw := range []*runWaiters{a1, a2} {
		select {
		case <-rw.done:
		default:
			t.Fatal("ending run a did not wake a caller waiting on it")
		}
	}
	select {
	case <-b.done:
		t.Fatal("ending run a woke a caller waiting on run b")
	default:
	}
	again := w.add("a")
	if again == a1 {
		t.Fatal("waiting again after a wake-up reused the closed wait")
	}
	w.remove("a", a1)
	w.remove("a", a2)
	if w.m["a"] != again {
		t.Fatal("removing the woken callers dropped the new wait on run a")
	}
	w.remove("a", again)
	w.remove("b", b)
	if len(w.m) != 0 {
		t.Fatalf("the set still holds %d runs after every caller left", len(w.m))
	}
}

// TestWaitersAfterAnExecutionEnds: when an execution here ends without
// ending its run, its callers are woken to read the run where the engine
// does not hear every end; where it does, only those whose run's end was
// announced while the execution ran (the announcement was skipped then),
// the others staying asleep until an announcement.
func TestWaitersAfterAnExecutionEnds(t *testing.T) {
	woken := func(rw *runWaiters) bool {
		select {
		case <-rw.done:
			return true
		default:
			return false
		}
	}
	executing := func(string) bool { return true }

	var w waiters
	quiet, announced := w.add("quiet"), w.add("announced")
	w.heard("announced", executing) // skipped: the run executes here
	if woken(announced) {
		t.Fatal("an announcement of a run executing here woke its caller")
	}
	w.executionEnded("quiet", true)
	w.executionEnded("announced", true)
	if woken(quiet) {
		t.Fatal("where every end is heard, an execution's end woke a caller whose run's end was never announced")
	}
	if !woken(announced) {
		t.Fatal("an execution's end did not wake a caller whose announcement it skipped")
	}

	var local waiters
	rw := local.add("r")
	local.executionEnded("r", false)
	if !woken(rw) {
		t.Fatal("where not every end is heard, an execution's end did not wake its run's caller")
	}

	var missed waiters
	rw = missed.add("r")
	missed.heardAll(executing)
	missed.executionEnded("r", true)
	if !woken(rw) {
		t.Fatal("after missed announcements, an execution's end did not wake its run's caller")
	}
}

// TestWaitersOnAnExecutionWakeAtItsEnd: a caller that waits on an
// execution here without having read the run (it may have come after the
// announcement of the run's end by another process) is woken when the
// execution ends, even where every end is heard.
func TestWaitersOnAnExecutionWakeAtItsEnd(t *testing.T) {
	var w waiters
	local := w.addLocal("r")
	w.executionEnded("r", true)
	select {
	case <-local.done:
	default:
		t.Fatal("an execution's end did not wake a caller waiting on it unread")
	}
}
