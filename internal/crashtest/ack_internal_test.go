package crashtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStepsAfterAck: a step begun under a later lease after its checkpoint
// was acknowledged is a lost write; one begun before, or by a stale holder
// under the older lease it was frozen with, is not.
func TestStepsAfterAck(t *testing.T) {
	dir := t.TempDir()
	ns := func(s int) int64 { return time.Unix(1000+int64(s), 0).UnixNano() }
	file := func(name string, lines ...string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	// Process 1 claims r (lease 1) and r2 (lease 2, taken over from
	// process 3, frozen holding lease 1), runs step0 of both, and the
	// store acknowledges both at 2s. Process 2 claims r again (lease 2)
	// at 5s and runs step0 at 6s: lost. Process 3, thawed, runs step0 of
	// r2 at 7s under its lease 1: stale, not lost.
	file("acks.1.log", itoa(ns(2))+" r step0@v1 1", itoa(ns(2))+" r2 step0@v1 2")
	file("effects.1.log", "r step0@v1 "+itoa(ns(1)), "r2 step0@v1 "+itoa(ns(1)))
	file("effects.2.log", "r step0@v1 "+itoa(ns(6)))
	file("effects.3.log", "r2 step0@v1 "+itoa(ns(7)))
	writes := map[int][]write{
		1: {{at: time.Unix(0, ns(0)), op: "claim", run: "r", token: 1}, {at: time.Unix(0, ns(0)), op: "claim", run: "r2", token: 2}},
		2: {{at: time.Unix(0, ns(5)), op: "claim", run: "r", token: 2}},
		3: {{at: time.Unix(0, ns(0)), op: "claim", run: "r2", token: 1}},
	}
	late := stepsAfterAck(t, dir, writes)
	if len(late) != 1 || !strings.Contains(late[0], "step r step0@v1") || !strings.Contains(late[0], "under lease 2") {
		t.Fatalf("late steps = %q, want process 2's step0 of r only", late)
	}
}
