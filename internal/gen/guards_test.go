package gen

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/gen/gentest"
)

// A payload type whose fields change after go generate stops the package
// from building, at the type's guard in stem_gen.go, whose line says to run
// go generate: a change go generate refuses cannot ship with the stale
// file. Once go generate accepts a change, the package builds again.
func TestShapeGuardStopsStaleBuild(t *testing.T) {
	t.Parallel()
	dir := gentest.Module(t, filepath.Join("testdata", "ShapeGuards"))
	generate := func() *Result {
		t.Helper()
		res, err := Generate(context.Background(), Config{Dir: dir, Env: gentest.Env()})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	commit := func(res *Result) {
		t.Helper()
		if len(res.Diagnostics) > 0 {
			t.Fatalf("go generate: %v", res.Diagnostics)
		}
		if _, err := Commit(res.Files); err != nil {
			t.Fatal(err)
		}
	}
	edit := func(file, old, now string) {
		t.Helper()
		path := filepath.Join(dir, file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s has no %q", file, old)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, now, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// buildFailsAt checks that the package does not build, at the guard of
	// typ, and returns the compiler's output.
	buildFailsAt := func(typ string) string {
		t.Helper()
		out, err := gentest.Go(dir, "build", "./...")
		if err == nil {
			t.Fatalf("the package builds with a stale %s after %s changed:\n%s", GenFileName, typ, out)
		}
		msg := err.Error()
		m := regexp.MustCompile(`stem_gen\.go:(\d+):\d+: cannot use ` + regexp.QuoteMeta(typ) + `\{\} \(value of struct type ` + regexp.QuoteMeta(typ) + `\) as shapeAtLastGoGenerate_ value in variable declaration`).FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("the build fails, but not at the guard of %s:\n%s", typ, msg)
		}
		src, err := os.ReadFile(filepath.Join(dir, GenFileName))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(m[1])
		line := strings.Split(string(src), "\n")[n-1]
		if want := "// stem: " + typ + " changed shape since go generate; run go generate"; !strings.HasSuffix(line, want) {
			t.Errorf("the line the compiler names, %d, is %q; want it to end %q", n, line, want)
		}
		return msg
	}

	commit(generate())
	if out, err := gentest.Go(dir, "build", "./..."); err != nil {
		t.Fatalf("the generated package does not build: %v\n%s", err, out)
	}

	// A field's type changes incompatibly: go generate refuses it, and the
	// stale file does not build either.
	edit("p.go", "ID      string        `json:\"id\"`", "ID      int64         `json:\"id\"`")
	buildFailsAt("Order")
	res := generate()
	if len(res.Diagnostics) == 0 || !strings.Contains(res.Diagnostics[0].Msg, "id: string became int64") {
		t.Fatalf("go generate accepted Order.ID from string to int64: %v", res.Diagnostics)
	}
	edit("p.go", "ID      int64         `json:\"id\"`", "ID      string        `json:\"id\"`")

	// A type of another package gains a field: compatible, but the build
	// stops until go generate has judged it, and builds after.
	edit("q/q.go", "\tA int\n\tB []Inner", "\tA int\n\tZ bool\n\tB []Inner")
	buildFailsAt("q.Exported")
	commit(generate())
	if out, err := gentest.Go(dir, "build", "./..."); err != nil {
		t.Fatalf("the package does not build after go generate: %v\n%s", err, out)
	}

	// A JSON tag renames a field (a removal and an addition): the guard
	// keeps tags, so this stops the build too.
	edit("p.go", "`json:\"lines\"`", "`json:\"line_ids\"`")
	buildFailsAt("Order")
}

// A package may import another's internal packages only from the tree
// rooted at the internal directory's parent.
func TestImportable(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     bool
	}{
		{"example.com/a", "example.com/b", true},
		{"example.com/a", "example.com/a/internal/x", true},
		{"example.com/a/b/c", "example.com/a/internal/x", true},
		{"example.com/ab", "example.com/a/internal/x", false},
		{"example.com/b", "example.com/a/internal/x", false},
		{"example.com/a/internal/y", "example.com/a/internal/x", true},
		{"example.com/a/x", "example.com/a/x/internal/y/internal/z", false},
		{"example.com/a/x/internal/y", "example.com/a/x/internal/y/internal/z", true},
		{"example.com/b", "internal/abi", false}, // the standard library's
		{"example.com/b", "net/http/internal/ascii", false},
	} {
		if got := importable(c.from, c.to); got != c.want {
			t.Errorf("importable(%q, %q) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
