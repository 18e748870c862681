package gen

import (
	"go/ast"

	"github.com/stemflow/stem/annotations"
	"github.com/stemflow/stem/determinism"
)

// checkDeterminism reports what makes the package's workflow code
// nondeterministic on replay, as the determinism analyzer (cmd/stemvet)
// finds it, so that go generate fails on it like on any other error.
// The analyzer tolerates the generated identifiers missing from the
// load: it reports what it resolves.
func checkDeterminism(lp *loadedPackage, d *diagnostics) {
	p := lp.pkg
	for _, f := range determinism.Inspect(d.fset, p.Syntax, p.Types, p.TypesInfo) {
		d.add(f.Pos, "%s", f.Message)
	}
}

// isAllow reports whether a comment is a //stem:allow directive, which
// marks no declaration: in a doc comment it is misplaced, as allowPlaced
// reports.
func isAllow(c *ast.Comment) bool {
	a, _ := annotations.ParseComment(c)
	_, ok := a.(*annotations.Allow)
	return ok
}

// allowPlaced reports whether a directive outside a doc comment is a
// //stem:allow, which belongs there: inside a function body, on the line
// it allows or alone on the line above. One outside any function body is
// reported here, as misplaced.
func (b *builder) allowPlaced(f *ast.File, a annotations.Annotation) bool {
	if _, ok := a.(*annotations.Allow); !ok {
		return false
	}
	inBody := false
	ast.Inspect(f, func(n ast.Node) bool {
		var body *ast.BlockStmt
		switch n := n.(type) {
		case *ast.FuncDecl:
			body = n.Body
		case *ast.FuncLit:
			body = n.Body
		}
		if body != nil && body.Pos() <= a.Pos() && a.Pos() < body.End() {
			inBody = true
		}
		return !inBody
	})
	if !inBody {
		b.d.add(a.Pos(), "//stem:allow is not inside a function body: put it on the line of the code it allows, or alone on the line above")
	}
	return true
}
