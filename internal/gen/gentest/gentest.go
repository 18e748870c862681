// Package gentest builds throwaway modules for testing stemgen and the code
// it generates: a temporary module that requires this repository's module
// through a replace directive, so generated code compiles and runs against
// the runtime and stores in this tree.
package gentest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// ModulePath is the module path of this repository.
const ModulePath = "github.com/stemflow/stem"

// CaseModule is the module path of the modules Module creates.
const CaseModule = "example.com/stemcase"

// Root returns the root directory of this repository's module, found by
// walking up from the test's working directory.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modfile.ModulePath(b) == ModulePath {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("gentest: no go.mod of %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

// Env is the go command's environment for the modules Module creates: no
// network, no workspace, requirements completed from the module cache.
func Env() []string {
	return append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
}

// Module creates a temporary module named CaseModule that requires this
// repository (replaced by its root directory, with its requirements and
// go.sum), copies the files of src into it (recursively, skipping any
// directory named "want"), and returns its directory.
func Module(t testing.TB, src string) string {
	t.Helper()
	root := Root(t)
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module %s\n\ngo %s\n\nrequire %s v0.0.0-00010101000000-000000000000\n\n", CaseModule, mf.Go.Version, ModulePath)
	for _, r := range mf.Require {
		fmt.Fprintf(&b, "require %s %s\n", r.Mod.Path, r.Mod.Version)
	}
	fmt.Fprintf(&b, "\nreplace %s => %s\n", ModulePath, root)
	write(t, filepath.Join(dir, "go.mod"), []byte(b.String()))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.sum"), sum)
	if src != "" {
		CopyDir(t, src, dir)
	}
	return dir
}

// CopyDir copies the files below src into dst, skipping directories named
// "want".
func CopyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "want" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		write(t, filepath.Join(dst, rel), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Go runs the go command in dir and returns its standard output; a failure
// is returned with the command's output.
func Go(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = Env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), fmt.Errorf("go %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}
