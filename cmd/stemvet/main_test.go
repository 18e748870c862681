package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/gen"
	"github.com/stemflow/stem/internal/gen/gentest"
)

const workflow = `package orders

import (
	"time"

	"github.com/stemflow/stem/runtime"
)

// Fulfil reads the clock between steps.
//
//stem:workflow name=orders.fulfil
func Fulfil(ctx *runtime.WorkflowContext, n int) (int, error) {
	start := time.Now()
	return helper(start), nil
}

func helper(t time.Time) int {
	go func() {}()
	return t.Second()
}
`

// TestMain makes the test binary stemvet itself when go vet runs it as
// its -vettool, so the test runs the command as built from these sources.
func TestMain(m *testing.M) {
	if os.Getenv("STEMVET_TEST_AS_TOOL") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestVetTool runs stemvet through go vet -vettool on a module with a
// nondeterministic workflow: go vet fails and names each finding's
// file:line:col and its fix.
func TestVetTool(t *testing.T) {
	t.Parallel()
	tool, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	dir := gentest.Module(t, "")
	if err := os.MkdirAll(filepath.Join(dir, "orders"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "orders", "orders.go"), []byte(workflow), 0o644); err != nil {
		t.Fatal(err)
	}
	vet := exec.Command("go", "vet", "-vettool="+tool, "./...")
	vet.Dir = dir
	vet.Env = append(gentest.Env(), "STEMVET_TEST_AS_TOOL=1")
	out, err := vet.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("go vet: %v, want a non-zero exit status\n%s", err, out)
	}
	for _, want := range []string{
		"orders/orders.go:13:11: time.Now in workflow orders.fulfil: a replay reads another time than the run did; use the context's Now (ctx.Now())",
		"orders/orders.go:18:2: go statement reached from workflow orders.fulfil via helper(): ",
		"start steps concurrently with the context's Async step methods (or runtime.StepAsync)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go vet output lacks %q:\n%s", want, out)
		}
	}

	// Allowed, the same code passes.
	allowed := strings.Replace(workflow, "start := time.Now()", "start := time.Now() //stem:allow time", 1)
	allowed = strings.Replace(allowed, "go func() {}()", "//stem:allow goroutine\n\tgo func() {}()", 1)
	if err := os.WriteFile(filepath.Join(dir, "orders", "orders.go"), []byte(allowed), 0o644); err != nil {
		t.Fatal(err)
	}
	vet = exec.Command("go", "vet", "-vettool="+tool, "./...")
	vet.Dir = dir
	vet.Env = append(gentest.Env(), "STEMVET_TEST_AS_TOOL=1")
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("go vet of the allowed code: %v\n%s", err, out)
	}
}

// TestVetGenerated runs stemvet on packages stemgen generated: it reports
// nothing in the generated code, nor in the workflows that call it (the
// context's steps, events, Sleep and futures), nor what //stem:allow
// allows.
func TestVetGenerated(t *testing.T) {
	t.Parallel()
	tool, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"Orders", "AllowNondeterminism"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			dir := gentest.Module(t, filepath.Join(gentest.Root(t), "internal", "gen", "testdata", c))
			res, err := gen.Generate(context.Background(), gen.Config{Dir: dir, Env: gentest.Env()})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Diagnostics) > 0 {
				t.Fatalf("stemgen: %v", res.Diagnostics)
			}
			if _, err := gen.Commit(res.Files); err != nil {
				t.Fatal(err)
			}
			vet := exec.Command("go", "vet", "-vettool="+tool, "./...")
			vet.Dir = dir
			vet.Env = append(gentest.Env(), "STEMVET_TEST_AS_TOOL=1")
			if out, err := vet.CombinedOutput(); err != nil {
				t.Fatalf("go vet: %v\n%s", err, out)
			}
		})
	}
}
