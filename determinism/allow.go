package determinism

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"github.com/stemflow/stem/annotations"
)

// allows indexes the //stem:allow comments of a package by the line they
// cover.
type allows struct {
	fset   *token.FileSet
	info   *types.Info
	list   []*allowComment
	byLine map[line][]*allowComment
	// unresolvedLines are lines of workflow code with names the type
	// information does not resolve: whether an allow comment there allows
	// something cannot be told.
	unresolvedLines map[line]bool
}

// line is one line of one file.
type line struct {
	file *token.File
	n    int
}

// allowComment is one //stem:allow comment.
type allowComment struct {
	a *annotations.Allow
	// covers is the line it allows on.
	covers line
	// inBody: it is inside a function body.
	inBody bool
	// used are the kinds it allowed something of.
	used map[string]bool
}

func newAllows(fset *token.FileSet, info *types.Info) *allows {
	return &allows{fset: fset, info: info, byLine: map[line][]*allowComment{}, unresolvedLines: map[line]bool{}}
}

// lineOf returns the line of pos.
func (al *allows) lineOf(pos token.Pos) (line, bool) {
	f := al.fset.File(pos)
	if f == nil {
		return line{}, false
	}
	return line{f, f.Line(pos)}, true
}

// file indexes the allow comments of a file. A comment covers its own
// line when code precedes it there, else the next line.
func (al *allows) file(f *ast.File) {
	tf := al.fset.File(f.Pos())
	if tf == nil {
		return
	}
	var bodies spans
	first := map[int]token.Pos{} // line → its first token
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case nil, *ast.CommentGroup, *ast.Comment:
			return false
		case *ast.FuncDecl:
			if n.Body != nil {
				bodies = append(bodies, span{n.Body.Pos(), n.Body.End()})
			}
		case *ast.FuncLit:
			bodies = append(bodies, span{n.Body.Pos(), n.Body.End()})
		}
		for _, p := range []token.Pos{n.Pos(), n.End() - 1} {
			if p < n.Pos() || !p.IsValid() {
				continue
			}
			l := tf.Line(p)
			if q, ok := first[l]; !ok || p < q {
				first[l] = p
			}
		}
		return true
	})
	for _, g := range f.Comments {
		for _, c := range g.List {
			if !annotations.IsDirective(c.Text) {
				continue
			}
			a, _ := annotations.ParseComment(c)
			allow, ok := a.(*annotations.Allow)
			if !ok || len(allow.Kinds) == 0 {
				continue
			}
			n := tf.Line(c.Slash)
			if q, ok := first[n]; !ok || q > c.Slash {
				n++
			}
			ac := &allowComment{a: allow, covers: line{tf, n}, inBody: bodies.contains(c.Slash) && !ast.IsGenerated(f), used: map[string]bool{}}
			al.list = append(al.list, ac)
			al.byLine[ac.covers] = append(al.byLine[ac.covers], ac)
		}
	}
}

// allows reports whether an allow comment allows kind at pos, and notes
// that it did.
func (al *allows) allows(pos token.Pos, kind string) bool {
	l, ok := al.lineOf(pos)
	if !ok {
		return false
	}
	for _, ac := range al.byLine[l] {
		if ac.a.Allows(kind) {
			ac.used[kind] = true
			return true
		}
	}
	return false
}

// unresolved notes a name of workflow code that the type information does
// not resolve.
func (al *allows) unresolved(id *ast.Ident) {
	if l, ok := al.lineOf(id.Pos()); ok {
		al.unresolvedLines[l] = true
	}
}

// unused reports the kinds of the allow comments inside function bodies
// that allowed nothing. inWorkflowCode tells the code inspected from the
// rest.
func (al *allows) unused(inWorkflowCode func(token.Pos) bool) []Finding {
	var out []Finding
	for _, ac := range al.list {
		if !ac.inBody || al.unresolvedLines[ac.covers] {
			continue
		}
		var unused []string
		for _, k := range ac.a.Kinds {
			if !ac.used[k] {
				unused = append(unused, k)
			}
		}
		if len(unused) == 0 {
			continue
		}
		why := "remove it"
		if !inWorkflowCode(ac.a.Pos()) {
			why = "only workflow code is checked, and no workflow reaches this line outside a step; remove it"
		}
		if len(unused) == len(ac.a.Kinds) {
			out = append(out, Finding{Pos: ac.a.Pos(), Kind: unused[0], Message: ac.a.String() + " here allows nothing: " + why})
			continue
		}
		if why == "remove it" {
			why = "remove it from the comment"
		}
		for _, k := range unused {
			out = append(out, Finding{Pos: ac.a.KeyPos(k), Kind: k, Message: strings.Join([]string{
				ac.a.String(), ": ", k, " here allows nothing: ", why}, "")})
		}
	}
	return out
}
