package gen

import (
	"bytes"
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/gen/gentest"
)

var update = flag.Bool("update", false, "rewrite the want files of testdata cases (only after the generated package builds)")

// TestCases runs every case folder in testdata. A case holds the input
// files of one package and a want folder with either
//
//   - errors.txt: the diagnostics, exactly, one per line; or
//   - stem_gen.go: the generated file, which must also build and pass go
//     vet in a module using this tree's runtime, and come out byte-identical
//     when generated again over itself; <pkg>stemtest/stem_gen.go, the
//     test-helper package, for every package that gets one; optionally
//     stem.manifest.json, the manifest written, output.txt, what `go run .`
//     of the package (a main package) prints, stem_workflows.md, the page
//     written, and warnings.txt, the warnings, exactly, one per line
//     (without it there must be none).
//
// A case with _test.go files has them pass go test (they exercise the
// test helpers); a case with a test-helper package and a main package
// checks that the program links neither the helpers nor testing.
func TestCases(t *testing.T) {
	cases, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			runCase(t, filepath.Join("testdata", c.Name()))
		})
	}
}

func runCase(t *testing.T, caseDir string) {
	want := filepath.Join(caseDir, "want")
	dir := gentest.Module(t, caseDir)
	res, err := Generate(context.Background(), Config{Dir: dir, Env: gentest.Env()})
	if err != nil {
		t.Fatal(err)
	}
	errorsFile := filepath.Join(want, "errors.txt")
	if _, err := os.Stat(errorsFile); err == nil || len(res.Diagnostics) > 0 && *update {
		var got strings.Builder
		for _, d := range res.Diagnostics {
			got.WriteString(d.Rel(dir) + "\n")
		}
		if len(res.Files) != 0 {
			t.Errorf("files generated despite diagnostics: %v", res.Files)
		}
		compare(t, errorsFile, []byte(got.String()))
		return
	}
	if len(res.Diagnostics) > 0 {
		for _, d := range res.Diagnostics {
			t.Error(d.Rel(dir))
		}
		t.FailNow()
	}
	var warnings strings.Builder
	for _, d := range res.Warnings {
		warnings.WriteString(d.Rel(dir) + "\n")
	}
	warningsFile := filepath.Join(want, "warnings.txt")
	if exists(warningsFile) || len(res.Warnings) > 0 {
		compare(t, warningsFile, []byte(warnings.String()))
	}
	if _, err := Commit(res.Files); err != nil {
		t.Fatal(err)
	}
	genFile := filepath.Join(dir, GenFileName)
	got, err := os.ReadFile(genFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := gentest.Go(dir, "vet", "./..."); err != nil {
		t.Fatalf("generated package does not build:\n%s\n%s", err, out)
	}
	helpers := helperFiles(t, dir, res.Files)
	if hasTests(t, caseDir) {
		if out, err := gentest.Go(dir, "test", "./..."); err != nil {
			t.Fatalf("the case's tests fail:\n%s\n%s", err, out)
		}
	}
	if len(helpers) > 0 {
		checkProgramsLinkNoHelpers(t, dir)
	}
	outputFile := filepath.Join(want, "output.txt")
	var output []byte
	if _, err := os.Stat(outputFile); err == nil {
		out, err := gentest.Go(dir, "run", ".")
		if err != nil {
			t.Fatal(err)
		}
		output = []byte(out)
	}

	// Generating again, over the file just written, gives the same bytes.
	again, err := Generate(context.Background(), Config{Dir: dir, Env: gentest.Env()})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Diagnostics) > 0 {
		t.Fatalf("second generation: %v", again.Diagnostics)
	}
	for _, f := range again.Files {
		old, err := os.ReadFile(f.Path)
		if err != nil || !bytes.Equal(old, f.Content) {
			t.Errorf("second generation changed %s", filepath.Base(f.Path))
		}
	}

	compare(t, filepath.Join(want, GenFileName), got)
	compareHelpers(t, dir, want, helpers)
	manifest, err := os.ReadFile(filepath.Join(dir, ManifestFileName))
	if err != nil {
		t.Fatal(err)
	}
	compare(t, filepath.Join(want, ManifestFileName), manifest)
	docsFile := filepath.Join(want, DocsFileName)
	if exists(docsFile) || *update {
		docs, err := os.ReadFile(filepath.Join(dir, DocsFileName))
		if err != nil {
			t.Fatal(err)
		}
		compare(t, docsFile, docs)
	}
	if output != nil || *update && exists(outputFile) {
		compare(t, outputFile, output)
	}
}

// helperFiles returns the test-helper files written, relative to dir.
func helperFiles(t *testing.T, dir string, files []File) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		rel, err := filepath.Rel(dir, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Content != nil && filepath.Base(rel) == GenFileName && filepath.Dir(rel) != "." {
			out = append(out, rel)
		}
	}
	return out
}

// compareHelpers compares the test-helper files written with want's, and
// checks that want holds no other.
func compareHelpers(t *testing.T, dir, want string, helpers []string) {
	t.Helper()
	for _, rel := range helpers {
		got, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		compare(t, filepath.Join(want, rel), got)
	}
	wanted, err := filepath.Glob(filepath.Join(want, "*", GenFileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wanted {
		rel, _ := filepath.Rel(want, w)
		if slices.Contains(helpers, rel) {
			continue
		}
		if *update {
			if err := os.RemoveAll(filepath.Dir(w)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s was not generated", w)
	}
}

// hasTests reports whether the case has _test.go files.
func hasTests(t *testing.T, caseDir string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(caseDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "want" {
			return filepath.SkipDir
		}
		found = found || strings.HasSuffix(path, "_test.go")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// checkProgramsLinkNoHelpers checks that no main package of the module
// links a test-helper package, or testing, which the helpers import.
func checkProgramsLinkNoHelpers(t *testing.T, dir string) {
	t.Helper()
	mains, err := gentest.Go(dir, "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./...")
	if err != nil {
		t.Fatal(err)
	}
	for _, main := range strings.Fields(mains) {
		deps, err := gentest.Go(dir, "list", "-deps", main)
		if err != nil {
			t.Fatal(err)
		}
		for _, dep := range strings.Fields(deps) {
			if dep == "testing" || strings.HasSuffix(dep, helperSuffix) {
				t.Errorf("program %s links %s", main, dep)
			}
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// compare checks got against the want file, or rewrites it with -update.
func compare(t *testing.T, wantFile string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(wantFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(wantFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(wantFile)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/gen -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test ./internal/gen -update to accept):\n%s", wantFile, diff(string(want), string(got)))
	}
}

// diff is a small line diff for failure messages.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	j, k := len(w)-1, len(g)-1
	for j >= i && k >= i && w[j] == g[k] {
		j--
		k--
	}
	for _, l := range w[i : j+1] {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range g[i : k+1] {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}

// TestDeterministic generates one case in two different directories: the
// output is byte-identical (no map order, no paths, no time in it).
func TestDeterministic(t *testing.T) {
	t.Parallel()
	var outputs [][]byte
	for range 2 {
		dir := gentest.Module(t, filepath.Join("testdata", "Orders"))
		res, err := Generate(context.Background(), Config{Dir: dir, Env: gentest.Env()})
		if err != nil || len(res.Diagnostics) > 0 || len(res.Files) != 3 {
			t.Fatalf("Generate: %v %v %d files", err, res.Diagnostics, len(res.Files))
		}
		outputs = append(outputs, slices.Concat(res.Files[0].Content, res.Files[1].Content, res.Files[2].Content))
		if bytes.Contains(outputs[len(outputs)-1], []byte(dir)) {
			t.Error("the output mentions its directory")
		}
	}
	if !bytes.Equal(outputs[0], outputs[1]) {
		t.Error("two generations differ")
	}
}
