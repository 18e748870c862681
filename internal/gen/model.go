package gen

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stemflow/stem/annotations"
)

// Package is the model of one annotated package: everything check and
// render need, in our own structs. Slices are sorted by Go name.
type Package struct {
	Path, Name, Dir string
	Workflows       []*Workflow
	Steps           []*Step
	Events          []*Event
	Updates         []*Update
	Streams         []*Stream
	// Errors are the variables, constants and types marked //stem:error.
	Errors []*DeclaredError
	// Receiver is the type whose methods are steps (the first, by position,
	// when check finds several), or nil when every step is a function.
	Receiver *Receiver
	// Declared holds the package-scope identifiers of the user's files.
	Declared map[string]token.Pos
	// UserMethods holds the methods the user's files declare, by the name of
	// their receiver's base type.
	UserMethods map[string][]Ident
	// Guards are the named types that are part of durable payloads, which
	// the generated file guards against a change of shape, sorted by name.
	Guards []*ShapeGuard
}

// Ident is a name and where it is declared.
type Ident struct {
	Name string
	Pos  token.Pos
}

// Receiver is the named type that holds step methods.
type Receiver struct {
	Name string
	Pos  token.Pos
}

// Role says what a parameter or result is for.
type Role int

// The roles of parameters and results.
const (
	RoleValue       Role = iota // a payload
	RoleStepContext             // runtime.StepContext
	RoleContext                 // context.Context
	RoleError                   // error
	RoleInvalid                 // its type did not type-check
	RoleTx                      // a store's transaction: pgx.Tx or *sql.Tx
)

// The transaction types a transactional step may take: pgx.Tx on Postgres
// (pgstore) and *sql.Tx on SQLite (sqlitestore), what the stores'
// storage.TxStore.TxType returns.
const (
	pgxPath = "github.com/jackc/pgx/v5"
	sqlPath = "database/sql"
)

// txTypes says which they are, for messages.
const txTypes = "pgx.Tx (" + pgxPath + ") or *sql.Tx (" + sqlPath + ")"

// txWhy says why no other type will do, for messages.
const txWhy = "transactional steps run in a Postgres or SQLite transaction; Redis and the in-memory store have none"

// isTxType reports whether t is one of the transaction types.
func isTxType(t types.Type) bool {
	if isNamed(t, pgxPath, "Tx") {
		return true
	}
	p, ok := types.Unalias(t).(*types.Pointer)
	return ok && isNamed(p.Elem(), sqlPath, "Tx")
}

// Func is a workflow's or step's Go function.
type Func struct {
	GoName string
	// Pos is the position of the function's name.
	Pos token.Pos
	// Doc is the user's doc comment without directives.
	Doc string
	// Recv is the method's receiver, nil for a function.
	Recv *Recv
	// TypeParams is the position of the type parameter list, if any.
	TypeParams token.Pos
	// ParamsPos is the position of the parameter list's "(", ParamsEnd of
	// its ")", ResultsPos of the result list (or the function's name when
	// it has none).
	ParamsPos, ParamsEnd, ResultsPos token.Pos
	Params                           []*Param
	Results                          []*Param
	Variadic                         bool
}

// Recv is a method's receiver.
type Recv struct {
	// TypeName is the receiver's base type name.
	TypeName string
	Generic  bool
	Pos      token.Pos
}

// Param is one parameter or result.
type Param struct {
	// Name is the declared name, "" when unnamed.
	Name string
	// Pos is the position of its type expression, Written that expression.
	Pos     token.Pos
	Written string
	// StarIdent is X when the type is written *X, else "".
	StarIdent string
	Role      Role
	Type      *Type
	// Shape is the canonical JSON shape of the type (see shape).
	Shape string
	// Problem says why the type is not a JSON payload, or is "".
	Problem string
}

// Workflow is a function marked //stem:workflow.
type Workflow struct {
	Func
	Ann *annotations.Workflow
	// Progress is the type progress= names, or nil without progress=.
	Progress *TypeRef
	// Calls are the calls of methods on the workflow's context in its
	// function's body, in source order.
	Calls []CtxCall
	// Newest is the newest version of the workflow's name in the package:
	// w itself, or the workflow with the same name= and the highest
	// version=, which alone gets the client API; w is then an older
	// version, kept to drain the runs started under it.
	Newest *Workflow
	// Attrs are the search attributes the workflow declares, in the order
	// of their //stem:attr directives.
	Attrs []*Attr
}

// TypeRef is the type a key names, a workflow's progress= or an update's
// reply=, as the package declares it (or does not).
type TypeRef struct {
	// Name is the type's name as the key gives it.
	Name string
	// Declared is what Name is in the package's scope: "" when nothing,
	// "type" for a type, else what it is instead ("function", "variable",
	// "constant").
	Declared string
	// Generic: the type has type parameters.
	Generic bool
	// Candidates are the type names the package declares, sorted, for
	// suggesting the closest to an unknown Name.
	Candidates []string
	Type       *Type
	// Shape is the canonical JSON shape of the type, Problem why it is not
	// a JSON payload (or "").
	Shape, Problem string
}

// Step is a method or function marked //stem:step.
type Step struct {
	Func
	Ann *annotations.Step
}

// Event is a type marked //stem:event.
type Event struct {
	GoName     string
	Pos        token.Pos
	Doc        string
	Ann        *annotations.Event
	TypeParams token.Pos
	Type       *Type
	Shape      string
	Problem    string
}

// Update is a type marked //stem:update: the request of an update.
type Update struct {
	GoName     string
	Pos        token.Pos
	Doc        string
	Ann        *annotations.Update
	TypeParams token.Pos
	Type       *Type
	Shape      string
	Problem    string
	// Reply is the type reply= names (nil only when reply= is missing,
	// which the parser reports).
	Reply *TypeRef
	// Validate is the function validate= names, or nil without
	// validate=.
	Validate *Validator
}

// Validator is the function an update's validate= names, as the package
// declares it (or does not).
type Validator struct {
	// Name is the function's name as validate= gives it.
	Name string
	// Declared is what Name is in the package's scope: "" when nothing,
	// "function" for a function, else what it is instead ("type",
	// "variable", "constant").
	Declared string
	// Candidates are the function names the package declares, sorted, for
	// suggesting the closest to an unknown Name.
	Candidates []string
	// Signature is the function's type as messages write it, relative to
	// the package: func(Cancel) error.
	Signature string
	// Fits: the function is a func(<request type>) error, without type
	// parameters.
	Fits bool
}

// Stream is a type marked //stem:stream: the value of a stream.
type Stream struct {
	GoName     string
	Pos        token.Pos
	Doc        string
	Ann        *annotations.Stream
	TypeParams token.Pos
	Type       *Type
	Shape      string
	Problem    string
}

// empty reports whether the package has nothing to generate.
func (m *Package) empty() bool {
	return len(m.Workflows) == 0 && len(m.Steps) == 0 && len(m.Events) == 0 && len(m.Errors) == 0 &&
		len(m.Updates) == 0 && len(m.Streams) == 0
}

// builder builds a Package from a loaded package.
type builder struct {
	lp   *loadedPackage
	info *types.Info
	pkg  *types.Package
	d    *diagnostics
	m    *Package
	// payloads are the types of every payload met, in order: what the
	// guards start from.
	payloads []types.Type
	// requests are the request types of the updates, for checking their
	// validators.
	requests map[*Update]types.Type
}

// buildModel collects the annotated declarations of a package. Malformed
// and misplaced directives are reported as it goes; everything else is
// judged by check.
func buildModel(lp *loadedPackage, d *diagnostics) *Package {
	p := lp.pkg
	b := &builder{lp: lp, info: p.TypesInfo, pkg: p.Types, d: d, requests: map[*Update]types.Type{}, m: &Package{
		Path: p.PkgPath, Name: p.Name, Dir: lp.dir,
		Declared: map[string]token.Pos{}, UserMethods: map[string][]Ident{},
	}}
	files := slices.Clone(p.Syntax)
	slices.SortFunc(files, func(x, y *ast.File) int {
		return cmp.Compare(d.fset.Position(x.Pos()).Filename, d.fset.Position(y.Pos()).Filename)
	})
	for _, f := range files {
		if filepath.Base(d.fset.Position(f.Pos()).Filename) == GenFileName {
			continue
		}
		b.file(f)
	}
	scope := p.Types.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if filepath.Base(d.fset.Position(obj.Pos()).Filename) != GenFileName {
			b.m.Declared[name] = obj.Pos()
		}
	}
	byName := func(x, y string, px, py token.Pos) int { return cmp.Or(cmp.Compare(x, y), cmp.Compare(px, py)) }
	slices.SortFunc(b.m.Workflows, func(x, y *Workflow) int { return byName(x.GoName, y.GoName, x.Pos, y.Pos) })
	slices.SortFunc(b.m.Steps, func(x, y *Step) int { return byName(x.GoName, y.GoName, x.Pos, y.Pos) })
	slices.SortFunc(b.m.Events, func(x, y *Event) int { return byName(x.GoName, y.GoName, x.Pos, y.Pos) })
	slices.SortFunc(b.m.Updates, func(x, y *Update) int { return byName(x.GoName, y.GoName, x.Pos, y.Pos) })
	slices.SortFunc(b.m.Streams, func(x, y *Stream) int { return byName(x.GoName, y.GoName, x.Pos, y.Pos) })
	slices.SortFunc(b.m.Errors, func(x, y *DeclaredError) int { return byName(x.GoName, y.GoName, x.Pos, y.Pos) })
	for _, s := range b.m.Steps {
		if s.Recv != nil && (b.m.Receiver == nil || s.Recv.Pos < b.m.Receiver.Pos) {
			b.m.Receiver = &Receiver{Name: s.Recv.TypeName, Pos: s.Recv.Pos}
		}
	}
	for _, w := range b.m.Workflows {
		if w.Ann.Progress != "" {
			w.Progress = b.typeRef(w.Ann.Progress)
		}
	}
	for _, u := range b.m.Updates {
		if u.Ann.Reply != "" {
			u.Reply = b.typeRef(u.Ann.Reply)
		}
		if u.Ann.Validate != "" {
			u.Validate = b.validator(u.Ann.Validate, b.requests[u])
		}
	}
	setNewest(b.m.Workflows)
	b.m.Guards = b.shapeGuards(b.payloads)
	return b.m
}

// setNewest sets each workflow's Newest: of the workflows with its name,
// the one with the highest version (the first by position among equals,
// which check reports).
func setNewest(ws []*Workflow) {
	newest := map[string]*Workflow{}
	for _, w := range ws {
		if w.Ann.Name == "" {
			continue
		}
		n, ok := newest[w.Ann.Name]
		if !ok || w.Ann.Version > n.Ann.Version || w.Ann.Version == n.Ann.Version && w.Pos < n.Pos {
			newest[w.Ann.Name] = w
		}
	}
	for _, w := range ws {
		w.Newest = w
		if n, ok := newest[w.Ann.Name]; ok {
			w.Newest = n
		}
	}
}

// isNewest reports whether w is the newest version of its name in the
// package, the one that gets the client API.
func (w *Workflow) isNewest() bool { return w.Newest == w }

// versions returns every version of w's name in the package, newest
// first.
func (m *Package) versions(w *Workflow) []*Workflow {
	var out []*Workflow
	for _, x := range m.Workflows {
		if x.Newest == w.Newest {
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(x, y *Workflow) int {
		return cmp.Or(cmp.Compare(y.Ann.Version, x.Ann.Version), cmp.Compare(x.Pos, y.Pos))
	})
	return out
}

// typeRef resolves the type a workflow's progress= or an update's reply=
// names in the package's scope, leaving out what the generated file
// declares.
func (b *builder) typeRef(name string) *TypeRef {
	p := &TypeRef{Name: name}
	scope := b.pkg.Scope()
	for _, n := range scope.Names() {
		if _, ok := scope.Lookup(n).(*types.TypeName); ok && b.m.Declared[n].IsValid() {
			p.Candidates = append(p.Candidates, n)
		}
	}
	obj := scope.Lookup(name)
	if obj == nil || !b.m.Declared[name].IsValid() {
		return p
	}
	switch obj := obj.(type) {
	case *types.TypeName:
		p.Declared = "type"
		if n, ok := types.Unalias(obj.Type()).(*types.Named); ok && n.TypeParams().Len() > 0 && n.TypeArgs().Len() == 0 {
			p.Generic = true
			return p
		}
		if !validType(obj.Type()) {
			return p
		}
		p.Type = &Type{Kind: KindNamed, Path: b.pkg.Path(), Pkg: b.pkg.Name(), Name: name}
		b.payloads = append(b.payloads, obj.Type())
		p.Shape = b.shape(obj.Type())
		p.Problem = b.problem(obj.Type())
	case *types.Func:
		p.Declared = "function"
	case *types.Var:
		p.Declared = "variable"
	case *types.Const:
		p.Declared = "constant"
	default:
		p.Declared = "declaration"
	}
	return p
}

// validator resolves the function an update's validate= names in the
// package's scope, leaving out what the generated file declares, and
// judges its signature against the update's request type req (nil when
// the request type did not type-check: the signature is then not judged).
func (b *builder) validator(name string, req types.Type) *Validator {
	v := &Validator{Name: name}
	scope := b.pkg.Scope()
	for _, n := range scope.Names() {
		if _, ok := scope.Lookup(n).(*types.Func); ok && b.m.Declared[n].IsValid() {
			v.Candidates = append(v.Candidates, n)
		}
	}
	obj := scope.Lookup(name)
	if obj == nil || !b.m.Declared[name].IsValid() {
		return v
	}
	switch obj := obj.(type) {
	case *types.Func:
		v.Declared = "function"
		sig := obj.Signature()
		v.Signature = b.describe(sig)
		v.Fits = req == nil || sig.TypeParams().Len() == 0 && !sig.Variadic() &&
			sig.Params().Len() == 1 && types.Identical(sig.Params().At(0).Type(), req) &&
			sig.Results().Len() == 1 && types.Identical(sig.Results().At(0).Type(), errorType)
	case *types.TypeName:
		v.Declared = "type"
	case *types.Var:
		v.Declared = "variable"
	case *types.Const:
		v.Declared = "constant"
	default:
		v.Declared = "declaration"
	}
	return v
}

// file collects one file's annotated declarations and reports directives
// that are not in a doc comment.
func (b *builder) file(f *ast.File) {
	used := map[*ast.Comment]bool{}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv != nil && len(decl.Recv.List) == 1 {
				if name, _ := baseType(decl.Recv.List[0].Type); name != "" {
					b.m.UserMethods[name] = append(b.m.UserMethods[name], Ident{decl.Name.Name, decl.Name.Pos()})
				}
			}
			a, attrs, early := b.directives(decl.Doc, used)
			if w, ok := a.(*annotations.Workflow); !ok || decl.Recv != nil {
				what := "function " + decl.Name.Name
				switch {
				case a != nil && a.Directive() == annotations.DirectiveStep:
					what = "step " + decl.Name.Name
				case decl.Recv != nil:
					what = "method " + decl.Name.Name
				}
				b.misplacedAttrs(attrs, what+" is not a workflow")
			} else {
				for _, at := range early {
					b.d.add(at.Pos(), "//stem:attr comes after the //stem:workflow of the workflow it belongs to (line %d): move it below", b.d.fset.Position(w.Pos()).Line)
				}
			}
			switch a := a.(type) {
			case *annotations.Workflow:
				if decl.Recv != nil {
					b.d.add(a.Pos(), "//stem:workflow marks a function, not a method: %s has a receiver", decl.Name.Name)
					continue
				}
				w := &Workflow{Func: b.fn(decl), Ann: a}
				if len(w.Params) > 0 {
					w.Calls = ctxCalls(decl.Body, w.Params[0].Name)
				}
				w.Attrs = b.attrs(attrs, b.inputType(decl))
				b.m.Workflows = append(b.m.Workflows, w)
			case *annotations.Step:
				b.m.Steps = append(b.m.Steps, &Step{Func: b.fn(decl), Ann: a})
			case *annotations.Event, *annotations.Update, *annotations.Stream:
				b.d.add(a.Pos(), "//stem:%s marks a type declaration, not function %s", a.Directive(), decl.Name.Name)
			case *annotations.ErrorDecl:
				b.d.add(a.Pos(), "//stem:error marks a %s, not function %s", target(a), decl.Name.Name)
			}
		case *ast.GenDecl:
			if decl.Tok == token.VAR || decl.Tok == token.CONST {
				b.values(decl, used)
				continue
			}
			if decl.Tok != token.TYPE {
				for _, doc := range genDocs(decl) {
					if a := b.directive(doc, used); a != nil {
						b.d.add(a.Pos(), "//stem:%s marks a %s, not a %s declaration", a.Directive(), target(a), decl.Tok)
					}
				}
				continue
			}
			if decl.Lparen.IsValid() {
				if a := b.directive(decl.Doc, used); a != nil {
					b.d.add(a.Pos(), "//stem:%s on a grouped type declaration: put it in the doc comment of one type in the group", a.Directive())
				}
			}
			for _, spec := range decl.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if !decl.Lparen.IsValid() {
					doc = decl.Doc
				}
				switch a := b.directive(doc, used).(type) {
				case *annotations.Event:
					b.m.Events = append(b.m.Events, b.event(ts, doc, a))
				case *annotations.Update:
					b.m.Updates = append(b.m.Updates, b.update(ts, doc, a))
				case *annotations.Stream:
					b.m.Streams = append(b.m.Streams, b.stream(ts, doc, a))
				case *annotations.ErrorDecl:
					b.m.Errors = append(b.m.Errors, b.errorType(ts, a))
				case nil:
				default:
					b.d.add(a.Pos(), "//stem:%s marks a function, not type %s", a.Directive(), ts.Name.Name)
				}
			}
		}
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if used[c] || !annotations.IsDirective(c.Text) {
				continue
			}
			a, err := annotations.ParseComment(c)
			b.parseErrors(err)
			switch {
			case a == nil || b.allowPlaced(f, a):
			case a.Directive() == annotations.DirectiveAttr:
				b.d.add(c.Slash, "//stem:attr is not in a doc comment: put it in the doc comment of the workflow function it belongs to, after its //stem:workflow")
			default:
				b.d.add(c.Slash, "//stem:%s is not in a doc comment: put it directly above the %s it marks, with no blank line between", a.Directive(), target(a))
			}
		}
	}
}

func target(a annotations.Annotation) string {
	switch a.Directive() {
	case annotations.DirectiveAttr:
		return "workflow function"
	case annotations.DirectiveEvent, annotations.DirectiveUpdate, annotations.DirectiveStream:
		return "type declaration"
	case annotations.DirectiveError:
		return "variable, constant or type declaration"
	}
	return "function"
}

// genDocs returns the doc comments of a declaration and its specs.
func genDocs(decl *ast.GenDecl) []*ast.CommentGroup {
	docs := []*ast.CommentGroup{decl.Doc}
	for _, spec := range decl.Specs {
		switch s := spec.(type) {
		case *ast.ValueSpec:
			docs = append(docs, s.Doc)
		case *ast.ImportSpec:
			docs = append(docs, s.Doc)
		}
	}
	return docs
}

// directive parses the directives of a doc comment of a declaration
// other than a function, reporting malformed ones, and returns the first;
// a second is an error, and so is a //stem:attr, which only a workflow
// has.
func (b *builder) directive(doc *ast.CommentGroup, used map[*ast.Comment]bool) annotations.Annotation {
	first, attrs, _ := b.directives(doc, used)
	b.misplacedAttrs(attrs, "this declaration is not a workflow function")
	return first
}

// misplacedAttrs reports //stem:attr directives on a declaration that is
// not a workflow; why says what it is.
func (b *builder) misplacedAttrs(attrs []*annotations.Attr, why string) {
	for _, a := range attrs {
		b.d.add(a.Pos(), "//stem:attr declares a search attribute of a workflow, after the //stem:workflow in its function's doc comment; %s", why)
	}
}

// directives parses the directives of a doc comment, reporting malformed
// ones, and returns the first other than //stem:attr (a second is an
// error), and the //stem:attr directives, in order: all of them, and
// those before the first other.
func (b *builder) directives(doc *ast.CommentGroup, used map[*ast.Comment]bool) (first annotations.Annotation, attrs, early []*annotations.Attr) {
	if doc == nil {
		return nil, nil, nil
	}
	for _, c := range doc.List {
		if !annotations.IsDirective(c.Text) || isAllow(c) {
			continue
		}
		used[c] = true
		a, err := annotations.ParseComment(c)
		b.parseErrors(err)
		if a == nil {
			continue
		}
		if at, ok := a.(*annotations.Attr); ok {
			attrs = append(attrs, at)
			if first == nil {
				early = append(early, at)
			}
			continue
		}
		if first != nil {
			b.d.add(a.Pos(), "second //stem: directive on one declaration (the first is //stem:%s at line %d)", first.Directive(), b.d.fset.Position(first.Pos()).Line)
			continue
		}
		first = a
	}
	return first, attrs, early
}

// inputType returns the type of a workflow function's input, its second
// parameter, or nil when it has no such parameter or it did not
// type-check.
func (b *builder) inputType(decl *ast.FuncDecl) types.Type {
	obj, ok := b.info.Defs[decl.Name].(*types.Func)
	if !ok || obj.Signature().Params().Len() != 2 {
		return nil
	}
	return obj.Signature().Params().At(1).Type()
}

func (b *builder) parseErrors(err error) {
	if list, ok := err.(annotations.ErrorList); ok {
		for _, e := range list {
			b.d.add(e.Pos, "%s", e.Msg)
		}
	}
}

// baseType returns the name of a receiver's base type and whether it has
// type parameters.
func baseType(e ast.Expr) (string, bool) {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	generic := false
	switch x := e.(type) {
	case *ast.IndexExpr:
		e, generic = x.X, true
	case *ast.IndexListExpr:
		e, generic = x.X, true
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name, generic
	}
	return "", generic
}

// fn builds the model of a function declaration.
func (b *builder) fn(decl *ast.FuncDecl) Func {
	f := Func{
		GoName:     decl.Name.Name,
		Pos:        decl.Name.Pos(),
		Doc:        decl.Doc.Text(),
		ParamsPos:  decl.Type.Params.Opening,
		ParamsEnd:  decl.Type.Params.Closing,
		ResultsPos: decl.Name.Pos(),
	}
	if decl.Type.Results != nil {
		f.ResultsPos = decl.Type.Results.Pos()
	}
	if decl.Type.TypeParams != nil {
		f.TypeParams = decl.Type.TypeParams.Pos()
	}
	if decl.Recv != nil && len(decl.Recv.List) == 1 {
		name, generic := baseType(decl.Recv.List[0].Type)
		f.Recv = &Recv{TypeName: name, Generic: generic, Pos: decl.Recv.List[0].Type.Pos()}
	}
	var sig *types.Signature
	if obj, ok := b.info.Defs[decl.Name].(*types.Func); ok {
		sig = obj.Signature()
	}
	f.Params = b.fields(decl.Type.Params, sig, func(s *types.Signature) *types.Tuple { return s.Params() })
	f.Results = b.fields(decl.Type.Results, sig, func(s *types.Signature) *types.Tuple { return s.Results() })
	f.Variadic = sig != nil && sig.Variadic()
	return f
}

// fields builds the parameters (or results) of a field list, with their
// types from the signature.
func (b *builder) fields(list *ast.FieldList, sig *types.Signature, tuple func(*types.Signature) *types.Tuple) []*Param {
	if list == nil {
		return nil
	}
	var out []*Param
	i := 0
	for _, field := range list.List {
		names := []string{""}
		if len(field.Names) > 0 {
			names = names[:0]
			for _, n := range field.Names {
				names = append(names, n.Name)
			}
		}
		for _, name := range names {
			p := &Param{Name: name, Pos: field.Type.Pos(), Written: types.ExprString(field.Type)}
			if s, ok := field.Type.(*ast.StarExpr); ok {
				if id, ok := s.X.(*ast.Ident); ok {
					p.StarIdent = id.Name
				}
			}
			var t types.Type = types.Typ[types.Invalid]
			if sig != nil && i < tuple(sig).Len() {
				t = tuple(sig).At(i).Type()
			}
			b.setType(p, t)
			out = append(out, p)
			i++
		}
	}
	return out
}

// setType fills in a parameter's role, type, shape and problem.
func (b *builder) setType(p *Param, t types.Type) {
	switch {
	case !validType(t):
		p.Role = RoleInvalid
		return
	case types.Identical(t, errorType):
		p.Role = RoleError
	case isNamed(t, runtimePath, "StepContext"):
		p.Role = RoleStepContext
	case isNamed(t, "context", "Context"):
		p.Role = RoleContext
	case isTxType(t):
		// Its shape and problem stay, for check to report it where a
		// payload belongs (a workflow's input, say).
		p.Role = RoleTx
	}
	p.Type = b.typ(t)
	p.Shape = b.shape(t)
	p.Problem = b.problem(t)
	if p.Role == RoleValue {
		b.payloads = append(b.payloads, t)
	}
}

// event builds the model of a type marked //stem:event.
func (b *builder) event(ts *ast.TypeSpec, doc *ast.CommentGroup, a *annotations.Event) *Event {
	ev := &Event{GoName: ts.Name.Name, Pos: ts.Name.Pos(), Doc: doc.Text(), Ann: a}
	if ts.TypeParams != nil {
		ev.TypeParams = ts.TypeParams.Pos()
	}
	ev.Type, ev.Shape, ev.Problem, _ = b.payloadType(ts)
	return ev
}

// payloadType resolves the type a type declaration marked //stem:event,
// //stem:update or //stem:stream declares: its model, its shape and its
// problem as a JSON payload, and its go/types type; a nil model when it
// did not type-check.
func (b *builder) payloadType(ts *ast.TypeSpec) (*Type, string, string, types.Type) {
	obj, ok := b.info.Defs[ts.Name].(*types.TypeName)
	if !ok || !validType(obj.Type()) {
		return nil, "", "", nil
	}
	b.payloads = append(b.payloads, obj.Type())
	t := &Type{Kind: KindNamed, Path: b.pkg.Path(), Pkg: b.pkg.Name(), Name: ts.Name.Name}
	return t, b.shape(obj.Type()), b.problem(obj.Type()), obj.Type()
}

// update builds the model of a type marked //stem:update; its reply= and
// validate= are resolved once every declaration is known.
func (b *builder) update(ts *ast.TypeSpec, doc *ast.CommentGroup, a *annotations.Update) *Update {
	u := &Update{GoName: ts.Name.Name, Pos: ts.Name.Pos(), Doc: doc.Text(), Ann: a}
	if ts.TypeParams != nil {
		u.TypeParams = ts.TypeParams.Pos()
	}
	var t types.Type
	u.Type, u.Shape, u.Problem, t = b.payloadType(ts)
	if t != nil && !u.TypeParams.IsValid() {
		b.requests[u] = t
	}
	return u
}

// stream builds the model of a type marked //stem:stream.
func (b *builder) stream(ts *ast.TypeSpec, doc *ast.CommentGroup, a *annotations.Stream) *Stream {
	s := &Stream{GoName: ts.Name.Name, Pos: ts.Name.Pos(), Doc: doc.Text(), Ann: a}
	if ts.TypeParams != nil {
		s.TypeParams = ts.TypeParams.Pos()
	}
	s.Type, s.Shape, s.Problem, _ = b.payloadType(ts)
	return s
}

// validType reports whether t type-checked.
func validType(t types.Type) bool {
	if t == nil {
		return false
	}
	bt, ok := types.Unalias(t).(*types.Basic)
	return !ok || bt.Kind() != types.Invalid
}

var errorType = types.Universe.Lookup("error").Type()

// isNamed reports whether t is the named type path.name.
func isNamed(t types.Type, path, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == path && n.Obj().Name() == name
}

// describe formats a type for messages, relative to the package.
func (b *builder) describe(t types.Type) string {
	return types.TypeString(t, types.RelativeTo(b.pkg))
}

// String formats a function's name for messages: F or T.M.
func (f *Func) String() string {
	if f.Recv != nil {
		return fmt.Sprintf("%s.%s", f.Recv.TypeName, f.GoName)
	}
	return f.GoName
}

// Inputs returns a step's parameters after its context, and after its
// transaction for a transactional step: its payloads.
func (s *Step) Inputs() []*Param {
	switch {
	case len(s.Params) == 0:
		return nil
	case s.Ann.Tx && len(s.Params) >= 2:
		return s.Params[2:]
	}
	return s.Params[1:]
}

// TxParam returns a transactional step's parameter after its context, the
// store's transaction (check reports one of another type), or nil for a
// step that is not transactional or has no such parameter.
func (s *Step) TxParam() *Param {
	if s.Ann.Tx && len(s.Params) >= 2 {
		return s.Params[1]
	}
	return nil
}

// calls reports whether workflow w calls step s (its method or the
// method's future form) in its function's body.
func (w *Workflow) calls(s *Step) bool {
	for _, c := range w.Calls {
		if c.Method == s.method() || c.Method == s.asyncMethod() && s.hasAsync() {
			return true
		}
	}
	return false
}

// Output returns a step's result value, or nil when it returns only error.
func (s *Step) Output() *Param {
	if len(s.Results) == 2 {
		return s.Results[0]
	}
	return nil
}

// Input returns a workflow's input parameter.
func (w *Workflow) Input() *Param { return w.Params[1] }

// Output returns a workflow's result value.
func (w *Workflow) Output() *Param { return w.Results[0] }

// inputShape is the manifest shape of a step's or workflow's inputs.
func inputShape(ps []*Param) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Shape
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
