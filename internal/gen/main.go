package gen

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

const usage = `usage: stemgen [-C dir] [-check] [packages]

stemgen generates stem_gen.go (and keeps stem.manifest.json) for each
package with //stem: annotations, and stem_workflows.md, a page with a
flowchart of each workflow and the package's event graph. For a package
with workflows (not a main package) it also writes <pkg>stemtest/stem_gen.go,
test helpers for the package's tests: step mocks, events sent at a virtual
time, and a crash test per workflow. Packages are
directories, relative to the working directory or absolute, optionally
ending in /... (default ".").
Run it from a //go:generate line:

	//go:generate go run github.com/stemflow/stem/cmd/stemgen

Errors are printed as path:line:col: message; on any error nothing is
written and the exit status is 1. Warnings are printed as
path:line:col: warning: message and change nothing: an event a workflow
awaits that nothing in the module sends or emits (calls in _test.go files
do not count).

Flags:
`

// Main is the stemgen command: it parses args, generates, and writes every
// file or none. It returns the exit code: 0 on success, 1 on errors (or
// stale files with -check), 2 on bad usage.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stemgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("C", "", "run as if started in `dir`")
	checkOnly := fs.Bool("check", false, "write nothing; report files that are out of date and exit 1 if any")
	verbose := fs.Bool("v", false, "print the files written")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	wd := *dir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			fmt.Fprintln(stderr, "stemgen:", err)
			return 1
		}
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		fmt.Fprintln(stderr, "stemgen:", err)
		return 1
	}
	res, err := Generate(context.Background(), Config{Dir: wd, Patterns: fs.Args()})
	if err != nil {
		fmt.Fprintln(stderr, "stemgen:", err)
		return 1
	}
	for _, w := range res.Warnings {
		w.Msg = "warning: " + w.Msg
		fmt.Fprintln(stderr, w.Rel(wd))
	}
	if len(res.Diagnostics) > 0 {
		for _, d := range res.Diagnostics {
			fmt.Fprintln(stderr, d.Rel(wd))
		}
		fmt.Fprintf(stderr, "stemgen: %d error(s); no file written\n", len(res.Diagnostics))
		return 1
	}
	rel := func(path string) string {
		if r, err := filepath.Rel(wd, path); err == nil {
			return r
		}
		return path
	}
	if *checkOnly {
		stale := 0
		for _, f := range res.Files {
			old, err := os.ReadFile(f.Path)
			exists := err == nil
			if f.Content == nil && exists || f.Content != nil && (!exists || !bytes.Equal(old, f.Content)) {
				fmt.Fprintf(stderr, "stemgen: %s is out of date; run go generate\n", rel(f.Path))
				stale++
			}
		}
		if stale > 0 {
			return 1
		}
		return 0
	}
	changed, err := Commit(res.Files)
	if err != nil {
		fmt.Fprintln(stderr, "stemgen:", err)
		return 1
	}
	if *verbose {
		for _, p := range changed {
			fmt.Fprintln(stdout, rel(p))
		}
	}
	return 0
}
