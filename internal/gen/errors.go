package gen

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"

	"github.com/dave/jennifer/jen"

	"github.com/stemflow/stem/annotations"
)

// DeclaredError is a variable, constant or type marked //stem:error: an
// error the generated code declares to the runtime under a durable name,
// so failures keep its identity through the store.
type DeclaredError struct {
	GoName string
	Pos    token.Pos
	Ann    *annotations.ErrorDecl
	// IsType: a type, matched with errors.As; else a value, matched with
	// errors.Is.
	IsType bool
	// Pointer: the type implements error through its pointer, which is
	// then what is declared.
	Pointer bool
	// Shape is, for a type, the JSON shape of the fields a failure records
	// (see shape), which the manifest records; "" for a value, or a type
	// that did not type-check.
	Shape string
	// Problem says why it cannot be declared, or "".
	Problem string
}

var errorIface = errorType.Underlying().(*types.Interface)

// values collects the //stem:error directives of a var or const
// declaration and reports any other directive there.
func (b *builder) values(decl *ast.GenDecl, used map[*ast.Comment]bool) {
	if decl.Lparen.IsValid() {
		if a := b.directive(decl.Doc, used); a != nil {
			if a.Directive() == annotations.DirectiveError {
				b.d.add(a.Pos(), "//stem:error on a grouped %s declaration: put it in the doc comment of one name in the group", decl.Tok)
			} else {
				b.d.add(a.Pos(), "//stem:%s marks a %s, not a %s declaration", a.Directive(), target(a), decl.Tok)
			}
		}
	}
	for _, spec := range decl.Specs {
		vs := spec.(*ast.ValueSpec)
		doc := vs.Doc
		if !decl.Lparen.IsValid() {
			doc = decl.Doc
		}
		switch a := b.directive(doc, used).(type) {
		case nil:
		case *annotations.ErrorDecl:
			b.m.Errors = append(b.m.Errors, b.errorValue(decl.Tok, vs, a))
		default:
			b.d.add(a.Pos(), "//stem:%s marks a %s, not a %s declaration", a.Directive(), target(a), decl.Tok)
		}
	}
}

// errorValue builds the model of a variable or constant marked
// //stem:error.
func (b *builder) errorValue(tok token.Token, vs *ast.ValueSpec, a *annotations.ErrorDecl) *DeclaredError {
	name := vs.Names[0]
	e := &DeclaredError{GoName: name.Name, Pos: name.Pos(), Ann: a}
	if len(vs.Names) > 1 {
		e.Problem = fmt.Sprintf("this %s declaration declares %d names; put //stem:error on a declaration of one", tok, len(vs.Names))
		return e
	}
	if name.Name == "_" {
		e.Problem = "the blank identifier cannot be declared as an error: give the value a name"
		return e
	}
	obj := b.info.Defs[name]
	if obj == nil || !validType(obj.Type()) {
		return e
	}
	t := obj.Type()
	switch {
	case !types.Implements(t, errorIface):
		e.Problem = fmt.Sprintf("%s has type %s, which is not an error (it has no method Error() string)", name.Name, b.describe(t))
	case !types.Comparable(t):
		e.Problem = fmt.Sprintf("%s has type %s, which is not comparable, so errors.Is cannot match it: mark its type //stem:error instead", name.Name, b.describe(t))
	}
	return e
}

// errorType builds the model of a type marked //stem:error.
func (b *builder) errorType(ts *ast.TypeSpec, a *annotations.ErrorDecl) *DeclaredError {
	e := &DeclaredError{GoName: ts.Name.Name, Pos: ts.Name.Pos(), Ann: a, IsType: true}
	if ts.TypeParams != nil {
		e.Problem = fmt.Sprintf("error type %s must not have type parameters", ts.Name.Name)
		return e
	}
	obj, ok := b.info.Defs[ts.Name].(*types.TypeName)
	if !ok || !validType(obj.Type()) {
		return e
	}
	t := obj.Type()
	switch {
	case types.IsInterface(t):
		e.Problem = fmt.Sprintf("%s is an interface; mark the concrete type that implements error", ts.Name.Name)
		return e
	case types.Implements(t, errorIface):
	case types.Implements(types.NewPointer(t), errorIface):
		e.Pointer = true
	default:
		e.Problem = fmt.Sprintf("type %s is not an error: neither %s nor *%s has a method Error() string", ts.Name.Name, ts.Name.Name, ts.Name.Name)
		return e
	}
	if p := b.problem(t); p != "" {
		e.Problem = fmt.Sprintf("error type %s cannot be recorded with a failure: %s; tag a field the failure need not carry `json:\"-\"`", ts.Name.Name, p)
	}
	e.Shape = b.shape(t)
	return e
}

// checkErrors reports declared errors that cannot be declared, and two
// that share a durable name.
func checkErrors(m *Package, d *diagnostics) {
	seen := map[string]*DeclaredError{}
	es := slices.SortedFunc(slices.Values(m.Errors), func(x, y *DeclaredError) int { return int(x.Pos) - int(y.Pos) })
	for _, e := range es {
		if e.Problem != "" {
			d.add(e.Pos, "%s", e.Problem)
		}
		if e.Ann.Name == "" {
			continue
		}
		if f, ok := seen[e.Ann.Name]; ok {
			d.add(e.Ann.ValuePos("name"), "error name %q is already used by %s (line %d); each declared error needs its own name",
				e.Ann.Name, f.GoName, d.fset.Position(f.Pos).Line)
			continue
		}
		seen[e.Ann.Name] = e
	}
}

// declaredErrors writes the init function that declares the package's
// //stem:error values and types to the runtime.
func (r *renderer) declaredErrors() {
	m := r.m
	if len(m.Errors) == 0 {
		return
	}
	r.f.Line()
	r.doc(fmt.Sprintf("init declares the errors of package %s marked //stem:error, under their durable names, "+
		"so that a failure holding one keeps its identity through the store: errors.Is and errors.As match it in "+
		"the workflow, from Result, in another process and after a replay.", m.Name), "")
	r.f.Func().Id("init").Params().BlockFunc(func(g *jen.Group) {
		for _, e := range m.Errors {
			switch {
			case !e.IsType:
				g.Add(rt("DeclareError")).Call(jen.Lit(e.Ann.Name), jen.Id(e.GoName))
			case e.Pointer:
				g.Add(rt("DeclareErrorType")).Types(jen.Op("*").Id(e.GoName)).Call(jen.Lit(e.Ann.Name))
			default:
				g.Add(rt("DeclareErrorType")).Types(jen.Id(e.GoName)).Call(jen.Lit(e.Ann.Name))
			}
		}
	})
}
