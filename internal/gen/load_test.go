package gen

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/gen/gentest"
	"github.com/stemflow/stem/internal/manifest"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func generate(t *testing.T, dir string, patterns ...string) *Result {
	t.Helper()
	res, err := Generate(context.Background(), Config{Dir: dir, Env: gentest.Env(), Patterns: patterns})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func diagStrings(res *Result, dir string) []string {
	var out []string
	for _, d := range res.Diagnostics {
		out = append(out, d.Rel(dir))
	}
	return out
}

const okPackage = `package %s

//stem:workflow name=%s.w
func W(ctx *WContext, n int) (int, error) { return n, nil }
`

func TestSyntaxErrorsAreReported(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, "")
	writeFile(t, filepath.Join(dir, "p.go"), "package p\n\n//stem:workflow name=p.w\nfunc W(ctx *WContext, n int) (int, error) {\n\treturn n nil\n}\n")
	res := generate(t, dir)
	got := diagStrings(res, dir)
	if len(got) == 0 || got[0] != "p.go:5:11: expected ';', found nil" {
		t.Errorf("diagnostics = %q", got)
	}
	if len(res.Files) != 0 {
		t.Errorf("files = %v", res.Files)
	}
}

func TestRemovedAnnotationsRemoveTheGeneratedFile(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, "")
	writeFile(t, filepath.Join(dir, "p.go"), strings.ReplaceAll(okPackage, "%s", "p"))
	if _, err := Commit(generate(t, dir).Files); err != nil {
		t.Fatal(err)
	}
	genFile := filepath.Join(dir, GenFileName)
	helperFile := filepath.Join(dir, "pstemtest", GenFileName)
	for _, f := range []string{genFile, helperFile} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	// The annotation goes; the package still uses nothing generated. The
	// load takes in the test-helper package too, which leaves its
	// removal to its parent's generation.
	writeFile(t, filepath.Join(dir, "p.go"), "package p\n\nfunc W() {}\n")
	res := generate(t, dir, "./...")
	if len(res.Diagnostics) > 0 {
		t.Fatal(res.Diagnostics)
	}
	manifestFile := filepath.Join(dir, ManifestFileName)
	docsFile := filepath.Join(dir, DocsFileName)
	paths := map[string][]byte{}
	for _, f := range res.Files {
		paths[f.Path] = f.Content
	}
	if c, ok := paths[genFile]; len(res.Files) != 4 || !ok || c != nil {
		t.Fatalf("files = %v, want the manifest and the removal of %s, %s and %s", res.Files, genFile, docsFile, helperFile)
	}
	for _, f := range []string{docsFile, helperFile} {
		if c, ok := paths[f]; !ok || c != nil {
			t.Fatalf("files = %v, want the removal of %s", res.Files, f)
		}
	}
	if _, ok := paths[manifestFile]; !ok {
		t.Fatalf("files = %v, want the manifest rewritten", res.Files)
	}
	changed, err := Commit(res.Files)
	if err != nil || len(changed) != 4 {
		t.Fatal(changed, err)
	}
	// The test helpers' directory goes with its file.
	for _, f := range []string{genFile, docsFile, filepath.Dir(helperFile)} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s still exists: %v", f, err)
		}
	}
	// The manifest, the history of stored shapes, stays: its workflow is
	// retired, since the build can no longer run its runs.
	m, err := manifest.Read(manifestFile)
	if err != nil {
		t.Fatalf("the manifest must stay: %v", err)
	}
	if want := []manifest.Workflow{{Key: "p.w@v1", Input: "int", Output: "int", Retired: true}}; !reflect.DeepEqual(m.Workflows, want) {
		t.Errorf("manifest workflows = %+v, want %+v", m.Workflows, want)
	}
	// Generating again changes nothing.
	if res := generate(t, dir); len(res.Diagnostics) > 0 {
		t.Fatal(res.Diagnostics)
	} else if changed, err := Commit(res.Files); err != nil || len(changed) != 0 {
		t.Errorf("second generation changed %v, %v", changed, err)
	}
}

// TestPatterns generates two packages in one load; a package with errors
// gets no files, the other does.
func TestPatterns(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, "")
	writeFile(t, filepath.Join(dir, "a", "a.go"), strings.ReplaceAll(okPackage, "%s", "a"))
	writeFile(t, filepath.Join(dir, "b", "b.go"), "package b\n\n//stem:workflow name=b.w retries=1\nfunc W(ctx *WContext, n int) (int, error) { return n, nil }\n")
	writeFile(t, filepath.Join(dir, "c", "c.go"), "package c\n\nfunc Plain() {}\n")
	res := generate(t, dir, "./...")
	want := []string{`b/b.go:3:26: unknown key "retries" in //stem:workflow; want name, version, timeout, progress, queue, retention, existing or ended`}
	if got := diagStrings(res, dir); !slices.Equal(got, want) {
		t.Errorf("diagnostics = %q, want %q", got, want)
	}
	var paths []string
	for _, f := range res.Files {
		rel, _ := filepath.Rel(dir, f.Path)
		paths = append(paths, rel)
	}
	if want := []string{"a/astemtest/" + GenFileName, "a/" + ManifestFileName, "a/" + GenFileName, "a/" + DocsFileName}; !slices.Equal(paths, want) {
		t.Errorf("files = %q, want %q", paths, want)
	}
}

func TestCommitWritesAllOrNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "blocker"), "a file, not a directory")
	// The first file's directory is created; the second's cannot be.
	first := filepath.Join(dir, "new", "sub", "first.go")
	_, err := Commit([]File{
		{Path: first, Content: []byte("package p\n")},
		{Path: filepath.Join(dir, "blocker", "second.go"), Content: []byte("package p\n")},
	})
	if err == nil {
		t.Fatal("Commit below a file succeeded")
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("the first file was written although the second failed: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "blocker" {
		t.Errorf("left behind: %v", entries)
	}

	changed, err := Commit([]File{{Path: first, Content: []byte("package p\n")}})
	if err != nil || len(changed) != 1 {
		t.Fatal(changed, err)
	}
	changed, err = Commit([]File{{Path: first, Content: []byte("package p\n")}})
	if err != nil || len(changed) != 0 {
		t.Errorf("rewriting identical content: changed %v, %v", changed, err)
	}
}

// TestLoadErrors: a missing directory is an error; so is a broken import
// in an annotated package (a package without annotations is not stemgen's
// to judge, see TestPatterns).
func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, "")
	res := generate(t, dir, "./nowhere")
	if len(res.Diagnostics) == 0 {
		t.Fatal("no diagnostic for a missing directory")
	}
	writeFile(t, filepath.Join(dir, "p.go"), "package p\n\nimport _ \"example.com/not/there\"\n\n"+
		"//stem:workflow name=p.w\nfunc W(ctx *WContext, n int) (int, error) { return n, nil }\n")
	res = generate(t, dir)
	if len(res.Diagnostics) != 1 || !strings.Contains(res.Diagnostics[0].Msg, "example.com/not/there") {
		t.Fatalf("diagnostics = %v", res.Diagnostics)
	}
}

// TestAnnotatedPackageImportingAnother generates two packages, one using
// the other's generated API, before either has been generated: the missing
// qualified identifiers are tolerated and the result builds.
func TestAnnotatedPackageImportingAnother(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, "")
	writeFile(t, filepath.Join(dir, "a", "a.go"), strings.ReplaceAll(okPackage, "%s", "a"))
	writeFile(t, filepath.Join(dir, "b", "b.go"), `package b

import (
	"context"

	"example.com/stemcase/a"
	"github.com/stemflow/stem/runtime"
)

//stem:workflow name=b.w
func W(ctx *WContext, n int) (int, error) { return n, nil }

// StartBoth starts a run of each.
func StartBoth(ctx context.Context, e *runtime.Engine) (*a.WRun, *WRun, error) {
	ra, err := a.StartW(ctx, e, 1)
	if err != nil {
		return nil, nil, err
	}
	rb, err := StartW(ctx, e, 2)
	return ra, rb, err
}
`)
	res := generate(t, dir, "./...")
	if len(res.Diagnostics) > 0 {
		t.Fatal(diagStrings(res, dir))
	}
	if _, err := Commit(res.Files); err != nil {
		t.Fatal(err)
	}
	if out, err := gentest.Go(dir, "build", "./..."); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestSignatureGuard: after a step's signature changes, the stale
// generated file stops compiling at its guard, naming the step.
func TestSignatureGuard(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, "")
	src := "package p\n\nimport \"github.com/stemflow/stem/runtime\"\n\n" +
		"//stem:workflow name=p.w\nfunc W(ctx *WContext, n int) (int, error) { return ctx.S(n) }\n\n" +
		"//stem:step name=s\nfunc S(ctx runtime.StepContext, n int) (int, error) { return n, nil }\n"
	writeFile(t, filepath.Join(dir, "p.go"), src)
	if _, err := Commit(generate(t, dir).Files); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "p.go"), strings.Replace(src, "func S(ctx runtime.StepContext, n int)", "func S(ctx runtime.StepContext, n int64)", 1))
	out, err := gentest.Go(dir, "build", ".")
	if err == nil {
		t.Fatalf("the stale file still compiles:\n%s", out)
	}
	if !strings.Contains(err.Error(), "stem_gen.go:") || !strings.Contains(err.Error(), "cannot use S (value of type func") {
		t.Errorf("build error does not point at the guard:\n%v", err)
	}
}
