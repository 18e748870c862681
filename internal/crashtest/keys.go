package crashtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// The workflows the key test starts: nothing works them, so a singleton's
// holder stays unfinished and a debounce window's run stays queued.
const (
	singleWorkflow   = "crashtest.single"
	debounceWorkflow = "crashtest.debounce"
)

const (
	envStarter = "STEM_CRASHTEST_STARTER"
	// keyStarts is how many starts each process makes of each kind, over
	// keyCount keys.
	keyStarts = 60
	keyCount  = 6
)

// RunKeys checks that singleton and debounce keys hold across four
// processes: each process starts keyStarts singleton runs and keyStarts
// debounced runs over keyCount keys of each, all four at once, each start
// with its own ID and input. For every key all starts must get one run
// (the same ID in every process), the store must hold exactly that run per
// key and no other, and a debounced run's input must be one a start gave.
func RunKeys(t *testing.T, cfg Config) {
	t.Helper()
	dir := t.TempDir()
	store := cfg.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cmds []*exec.Cmd
	for range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), cfg.Env...), envWorker+"=1", envStarter+"=1", envDir+"="+dir)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	// The processes wait for the go file, so that their starts race.
	waitFiles(ctx, t, dir, "ready.", 4)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("starter process %d: %v", c.Process.Pid, err)
		}
	}
	got := map[string]map[string]bool{} // "S k" / "D k" -> run IDs returned
	inputs := map[string]map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "starts.*.log"))
	lines := 0
	for _, f := range files {
		forLines(t, f, func(line string) {
			kind, key, id, in := "", "", "", ""
			if _, err := fmt.Sscan(line, &kind, &key, &id, &in); err != nil {
				t.Fatalf("starts log %s: %q: %v", f, line, err)
			}
			k := kind + " " + key
			if got[k] == nil {
				got[k], inputs[k] = map[string]bool{}, map[string]bool{}
			}
			got[k][id] = true
			inputs[k][in] = true
			lines++
		})
	}
	if lines != 4*2*keyStarts {
		t.Fatalf("%d starts logged; want %d", lines, 4*2*keyStarts)
	}
	for k, ids := range got {
		if len(ids) != 1 {
			t.Fatalf("key %s: the starts got %d runs (%v); want one", k, len(ids), ids)
		}
	}
	for _, wf := range []string{singleWorkflow, debounceWorkflow} {
		page, err := store.ListRuns(ctx, storage.ListRunsQuery{Workflow: wf, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) != keyCount {
			t.Fatalf("%d runs of %s stored; want %d, one per key", len(page.Runs), wf, keyCount)
		}
		for _, r := range page.Runs {
			if wf == debounceWorkflow {
				if r.ReadyAt == nil || r.Status != storage.StatusQueued {
					t.Fatalf("debounced run %s is %s; want queued until its window closes", r.ID, r.Status)
				}
				key := ""
				for k, ids := range got {
					if strings.HasPrefix(k, "D ") && ids[r.ID] {
						key = k
					}
				}
				if key == "" || !inputs[key][string(r.Input)] {
					t.Fatalf("debounced run %s has input %s, which no start of its key gave", r.ID, r.Input)
				}
			}
		}
	}
	t.Logf("keys: %d starts in 4 processes made %d singleton and %d debounced runs", lines, keyCount, keyCount)
}

// starter is a key test's process: it starts its runs at the harness's
// signal and logs what each start returned.
func starter(open func() (storage.Store, error)) int {
	dir := os.Getenv(envDir)
	store, err := open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest starter: open store:", err)
		return 2
	}
	defer store.Close()
	e, err := runtime.New(runtime.Config{Store: store})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest starter:", err)
		return 2
	}
	noop := func(c *runtime.WorkflowContext, in int) (int, error) { return in, nil }
	if err := runtime.Register(e, singleWorkflow, noop); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest starter:", err)
		return 2
	}
	if err := runtime.Register(e, debounceWorkflow, noop); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest starter:", err)
		return 2
	}
	pid := os.Getpid()
	log, err := os.Create(filepath.Join(dir, fmt.Sprintf("starts.%d.log", pid)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest starter:", err)
		return 2
	}
	defer log.Close()
	if err := os.WriteFile(filepath.Join(dir, "ready."+strconv.Itoa(pid)), nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest starter:", err)
		return 2
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx := context.Background()
	for i := range keyStarts {
		in := pid*1000 + i
		key := fmt.Sprintf("k%d", i%keyCount)
		run, err := runtime.Start[int, int](ctx, e, singleWorkflow, in, runtime.WithID(fmt.Sprintf("s-%d-%d", pid, i)), runtime.WithSingleton(key))
		if err != nil {
			fmt.Fprintln(os.Stderr, "crashtest starter: singleton start:", err)
			return 2
		}
		fmt.Fprintf(log, "S %s %s %d\n", key, run.ID(), in)
		run, err = runtime.Start[int, int](ctx, e, debounceWorkflow, in, runtime.WithID(fmt.Sprintf("d-%d-%d", pid, i)), runtime.WithDebounce(key, 10*time.Minute))
		if err != nil {
			fmt.Fprintln(os.Stderr, "crashtest starter: debounced start:", err)
			return 2
		}
		fmt.Fprintf(log, "D %s %s %d\n", key, run.ID(), in)
	}
	return 0
}

// waitFiles waits until dir holds n files named with prefix.
func waitFiles(ctx context.Context, t *testing.T, dir, prefix string, n int) {
	t.Helper()
	for {
		files, _ := filepath.Glob(filepath.Join(dir, prefix+"*"))
		if len(files) >= n {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d processes got ready", len(files), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
