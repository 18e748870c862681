package determinism

import (
	"go/ast"
	"go/token"
	"go/types"

	"github.com/stemflow/stem/annotations"
)

// runtimePath is the import path of Stem's runtime.
const runtimePath = "github.com/stemflow/stem/runtime"

// stepRunners are the runtime's functions whose function arguments run as
// steps, outside replay.
var stepRunners = map[string]bool{
	runtimePath + ".Step":      true,
	runtimePath + ".Do":        true,
	runtimePath + ".StepAsync": true,
	runtimePath + ".DoAsync":   true,
}

// walker inspects one function body reached from a workflow.
type walker struct {
	*inspector
	o origin
	// callees are the package's functions the body calls or refers to, in
	// order of appearance.
	callees []*ast.FuncDecl
	// stepArgs are the arguments of calls to stepRunners: they run as
	// steps.
	stepArgs map[ast.Expr]bool
	// commOps are the channel operations that are the cases of a select,
	// reported with their select.
	commOps map[ast.Node]bool
	// after maps each range statement to the statements that follow it in
	// its block.
	after map[*ast.RangeStmt][]ast.Stmt
}

// body inspects a function body with its origin, and returns the
// functions of the package it reaches.
func (a *inspector) body(body *ast.BlockStmt, o origin) []*ast.FuncDecl {
	if body == nil {
		return nil
	}
	a.workflowCode = append(a.workflowCode, span{body.Pos(), body.End()})
	w := &walker{inspector: a, o: o, stepArgs: map[ast.Expr]bool{}, commOps: map[ast.Node]bool{}, after: map[*ast.RangeStmt][]ast.Stmt{}}
	ast.Inspect(body, func(n ast.Node) bool {
		var list []ast.Stmt
		switch n := n.(type) {
		case *ast.BlockStmt:
			list = n.List
		case *ast.CaseClause:
			list = n.Body
		case *ast.CommClause:
			list = n.Body
		}
		for i, s := range list {
			for {
				l, ok := s.(*ast.LabeledStmt)
				if !ok {
					break
				}
				s = l.Stmt
			}
			if rs, ok := s.(*ast.RangeStmt); ok {
				w.after[rs] = list[i+1:]
			}
		}
		return true
	})
	ast.Inspect(body, w.visit)
	return w.callees
}

// visit inspects one node; it returns whether to inspect its children.
func (w *walker) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.FuncLit:
		if w.stepArgs[n] || w.isStepLiteral(n) {
			w.stepCode = append(w.stepCode, span{n.Pos(), n.End()})
			return false
		}
	case *ast.CallExpr:
		w.call(n)
	case *ast.SelectorExpr:
		if !w.stdStream(n.X) {
			w.ident(n.Sel, n.Pos())
		}
		// The selector itself is done; its operand may hold more.
		ast.Inspect(n.X, w.visit)
		return false
	case *ast.Ident:
		w.ident(n, n.Pos())
	case *ast.GoStmt:
		w.report(n.Pos(), annotations.AllowGoroutine, w.o, "go statement",
			"the goroutine runs beside the workflow, outside its checkpoints, so neither what it does nor when is replayed",
			"start steps concurrently with the context's Async step methods (or runtime.StepAsync) and wait for them with Await or the context's All (runtime.All)")
	case *ast.SelectStmt:
		for _, c := range n.Body.List {
			if cc, ok := c.(*ast.CommClause); ok && cc.Comm != nil {
				ast.Inspect(cc.Comm, func(m ast.Node) bool {
					switch m := m.(type) {
					case *ast.SendStmt:
						w.commOps[m] = true
					case *ast.UnaryExpr:
						if m.Op == token.ARROW {
							w.commOps[m] = true
						}
					}
					return true
				})
			}
		}
		w.report(n.Pos(), annotations.AllowSelect, w.o, "select",
			"which case is ready first is not recorded, so a replay may take another",
			"select over futures with the context's Select (runtime.Select), which checkpoints the winner")
	case *ast.SendStmt:
		if !w.commOps[n] {
			w.report(n.Pos(), annotations.AllowSelect, w.o, "channel send", chanWhy, chanFix)
		}
	case *ast.UnaryExpr:
		switch n.Op {
		case token.ARROW:
			if !w.commOps[n] {
				w.report(n.Pos(), annotations.AllowSelect, w.o, "channel receive", chanWhy, chanFix)
			}
		case token.AND:
			if v, name := w.globalRoot(n.X); v != nil {
				w.report(n.Pos(), annotations.AllowGlobal, w.o, "taking the address of package variable "+name+", which lets code write it,", globalWhy, globalFix)
			}
		}
	case *ast.AssignStmt:
		if n.Tok != token.DEFINE {
			for _, lhs := range n.Lhs {
				w.write(lhs)
			}
		}
	case *ast.IncDecStmt:
		w.write(n.X)
	case *ast.RangeStmt:
		w.rangeStmt(n)
	}
	return true
}

const (
	chanWhy = "what a channel delivers, and when, is not recorded, so a replay may see other values or block"
	chanFix = "pass data through step results, events (runtime.WaitForEvent) or futures"

	globalWhy = "package variables are shared by every run in the process and outlive a replay, which then starts from what other runs left there"
	globalFix = "keep the state in local variables and step results"
)

// isStepLiteral reports whether a function literal takes a
// runtime.StepContext first: it is a step's body.
func (w *walker) isStepLiteral(lit *ast.FuncLit) bool {
	params := lit.Type.Params
	if params == nil || len(params.List) == 0 {
		return false
	}
	t := w.info.TypeOf(params.List[0].Type)
	return t != nil && isNamed(t, runtimePath, "StepContext")
}

// isNamed reports whether t is the named type path.name.
func isNamed(t types.Type, path, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == path && n.Obj().Name() == name
}

// call handles what is special about a call: the step runners' function
// arguments, and pointer methods called on package variables.
func (w *walker) call(call *ast.CallExpr) {
	if fn := w.callee(call); fn != nil && stepRunners[fn.FullName()] {
		for _, arg := range call.Args {
			arg = ast.Unparen(arg)
			w.stepArgs[arg] = true
			// A step body passed by name is not workflow code either.
			switch a := arg.(type) {
			case *ast.Ident:
				w.stepArgs[a] = true
			case *ast.SelectorExpr:
				w.stepArgs[a.Sel] = true
			}
		}
	}
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return
	}
	s, ok := w.info.Selections[sel]
	if !ok || s.Kind() != types.MethodVal {
		return
	}
	fn, ok := s.Obj().(*types.Func)
	if !ok {
		return
	}
	recv := fn.Signature().Recv()
	if recv == nil {
		return
	}
	if _, ptr := recv.Type().(*types.Pointer); !ptr {
		return
	}
	if t := w.info.TypeOf(sel.X); t == nil {
		return
	} else if _, ptr := t.Underlying().(*types.Pointer); ptr {
		return
	}
	if v, name := w.globalRoot(sel.X); v != nil {
		w.report(sel.Pos(), annotations.AllowGlobal, w.o, "call of pointer method "+fn.Name()+" on package variable "+name+", which may change it,", globalWhy, globalFix)
	}
}

// callee returns the function a call calls, when it is a named function
// or method.
func (w *walker) callee(call *ast.CallExpr) *types.Func {
	fun := ast.Unparen(call.Fun)
	switch f := fun.(type) {
	case *ast.IndexExpr:
		fun = f.X
	case *ast.IndexListExpr:
		fun = f.X
	}
	var id *ast.Ident
	switch f := fun.(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	default:
		return nil
	}
	fn, _ := w.info.Uses[id].(*types.Func)
	return fn
}

// ident handles a use of a name: a same-package function reached, or a
// nondeterministic function or variable of another package. pos is where
// to report it: the start of its selector expression, if any.
func (w *walker) ident(id *ast.Ident, pos token.Pos) {
	obj := w.info.Uses[id]
	if obj == nil {
		if _, def := w.info.Defs[id]; !def && id.Name != "_" {
			w.allow.unresolved(id)
		}
		return
	}
	if fn, ok := obj.(*types.Func); ok {
		fn = fn.Origin()
		if fn.Pkg() == w.pkg && w.pkg != nil {
			decl := w.decls[fn]
			if decl != nil && !w.steps[decl] && !w.stepArgs[id] {
				w.callees = append(w.callees, decl)
			}
			if decl == nil && isClock(fn, fn.Pkg().Path()) {
				// A clock interface's Now, declared here: its bodies are
				// elsewhere.
				name, _ := funcName(fn)
				w.report(pos, clockRule.kind, w.o, name, clockRule.why, clockRule.fix)
			}
			return
		}
	}
	if r, name := classify(obj); r != nil {
		w.report(pos, r.kind, w.o, name, r.why, r.fix)
	}
}

// stdStream reports whether x is os.Stdout or os.Stderr: writing there is
// output, like logging, which a replay repeats but does not depend on.
func (w *walker) stdStream(x ast.Expr) bool {
	var id *ast.Ident
	switch x := ast.Unparen(x).(type) {
	case *ast.SelectorExpr:
		id = x.Sel
	case *ast.Ident:
		id = x
	default:
		return false
	}
	v, ok := w.info.Uses[id].(*types.Var)
	return ok && v.Pkg() != nil && v.Pkg().Path() == "os" && (v.Name() == "Stdout" || v.Name() == "Stderr")
}

// write reports an assignment's target when it is (part of) a package
// variable.
func (w *walker) write(lhs ast.Expr) {
	if v, name := w.globalRoot(lhs); v != nil {
		w.report(lhs.Pos(), annotations.AllowGlobal, w.o, "write to package variable "+name, globalWhy, globalFix)
	}
}

// globalRoot returns the package variable an addressable expression is
// part of, and its name for messages, or nil.
func (w *walker) globalRoot(e ast.Expr) (*types.Var, string) {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			t := w.info.TypeOf(x.X)
			if t == nil {
				return nil, ""
			}
			switch t.Underlying().(type) {
			case *types.Slice, *types.Array, *types.Map, *types.Pointer:
				e = x.X
			default:
				return nil, ""
			}
		case *ast.StarExpr:
			e = x.X
		case *ast.SelectorExpr:
			if s, ok := w.info.Selections[x]; ok {
				if s.Kind() != types.FieldVal {
					return nil, ""
				}
				e = x.X
				continue
			}
			// A qualified identifier, pkg.V.
			return w.packageVar(x.Sel)
		case *ast.Ident:
			return w.packageVar(x)
		default:
			return nil, ""
		}
	}
}

// packageVar returns the package variable id names, or nil.
func (w *walker) packageVar(id *ast.Ident) (*types.Var, string) {
	v, ok := w.info.Uses[id].(*types.Var)
	if !ok || v.IsField() || v.Pkg() == nil || v.Parent() != v.Pkg().Scope() {
		return nil, ""
	}
	if v.Pkg() != w.pkg {
		return v, v.Pkg().Name() + "." + v.Name()
	}
	return v, v.Name()
}

// rangeStmt reports a range over a channel, or over a map whose body
// depends on the order, and assignments of its variables to package
// variables.
func (w *walker) rangeStmt(rs *ast.RangeStmt) {
	if rs.Tok == token.ASSIGN {
		for _, e := range []ast.Expr{rs.Key, rs.Value} {
			if e != nil {
				w.write(e)
			}
		}
	}
	if t := w.info.TypeOf(rs.X); t != nil {
		if _, ok := t.Underlying().(*types.Chan); ok {
			w.report(rs.Pos(), annotations.AllowSelect, w.o, "range over a channel", chanWhy, chanFix)
			return
		}
	}
	what, keyed := w.mapIteration(rs.X)
	if what == "" || w.orderFree(rs, keyed) {
		return
	}
	w.report(rs.Pos(), annotations.AllowMap, w.o, what, mapWhy, mapFix)
}

const (
	mapWhy = "Go randomizes map order, so a replay may call steps or build results in another order than the run did"
	mapFix = "range over sorted keys (slices.Sorted(maps.Keys(m)))"
)

// mapIteration says what x is when it iterates over a map in random
// order: a map, or maps.Keys, maps.Values or maps.All of one; "" when it
// is neither. keyed reports whether the iteration's first variable is the
// map's key, distinct in every iteration.
func (w *walker) mapIteration(x ast.Expr) (what string, keyed bool) {
	if t := w.info.TypeOf(x); t != nil {
		if _, ok := t.Underlying().(*types.Map); ok {
			return "range over a map", true
		}
	}
	if call, ok := ast.Unparen(x).(*ast.CallExpr); ok {
		if fn := w.callee(call); fn != nil {
			switch fn.FullName() {
			case "maps.Keys", "maps.All":
				return "range over " + fn.FullName(), true
			case "maps.Values":
				return "range over " + fn.FullName(), false
			}
		}
	}
	return "", false
}
