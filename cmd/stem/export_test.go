package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stemflow/stem/runtime"
)

// TestExport writes a run's history to a file and to standard output, in
// the form runtime.ReadHistory reads; a typo'd flag or an unknown run is
// refused in words.
func TestExport(t *testing.T) {
	f := newFixture(t, nil, true)
	run, err := runtime.Start[string, string](f.ctx, f.e, "approve", "ada", runtime.WithID("req-1"))
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f.e, run.ID(), runtime.StatusWaiting)
	file := filepath.Join(t.TempDir(), "req-1.json")
	if out, _ := f.cli(0, "export", "req-1", "--out", file); !strings.Contains(out, "wrote the history of run req-1 (approve, execution 1, 1 calls)") {
		t.Fatalf("export --out said:\n%s", out)
	}
	r, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := runtime.ReadHistory(r)
	if err != nil {
		t.Fatal(err)
	}
	if h.RunID != "req-1" || h.Workflow != "approve" || h.Status != runtime.StatusWaiting || len(h.Calls) != 1 || h.Calls[0].Key != "ask@v1" || string(h.Input) != `"ada"` {
		t.Fatalf("exported history = %+v", h)
	}
	out, _ := f.cli(0, "export", "req-1")
	if _, err := runtime.ReadHistory(strings.NewReader(out)); err != nil {
		t.Fatalf("export to standard output does not read back: %v\n%s", err, out)
	}
	if _, stderr := f.cli(2, "export", "req-1", "--otu", file); !strings.Contains(stderr, "--out") {
		t.Fatalf("a typo'd flag: %s", stderr)
	}
	if _, stderr := f.cli(1, "export", "req-9"); !strings.Contains(stderr, "req-9") {
		t.Fatalf("an unknown run: %s", stderr)
	}
}
