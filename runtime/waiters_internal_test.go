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
