package gen

import (
	"go/ast"
	"go/token"
)

// CtxCall is a call of a method on a workflow's context, ctx.M(...), found
// in the workflow function's body. The methods are generated, so the load
// has no types for them: calls are found by syntax, on the function's first
// parameter.
type CtxCall struct {
	// Method is the method's name, Pos the position of that name.
	Method string
	Pos    token.Pos
	// InLoop: the call sits in a for or range statement's body, condition
	// or post statement (or in a function literal there), so it may run
	// more than once, and no unconditional return after it, in the loop's
	// body, ends the loop first.
	InLoop bool
}

// ctxCalls returns the calls of methods on the context parameter named ctx
// in body, in source order.
func ctxCalls(body *ast.BlockStmt, ctx string) []CtxCall {
	if body == nil || ctx == "" || ctx == "_" {
		return nil
	}
	var (
		out   []CtxCall
		stack []ast.Node // the ancestors of the node visited, outermost first
	)
	ast.Inspect(body, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := ast.Unparen(c.Fun).(*ast.SelectorExpr); ok {
				if id, ok := ast.Unparen(sel.X).(*ast.Ident); ok && id.Name == ctx {
					out = append(out, CtxCall{Method: sel.Sel.Name, Pos: sel.Sel.Pos(), InLoop: repeats(append(stack, c))})
				}
			}
		}
		stack = append(stack, n)
		return true
	})
	return out
}

// repeats reports whether the last node of path (its ancestors first) may
// run more than once: it is in a loop's repeated part, and the loop is not
// provably left, by a return, right after it. A return inside a function
// literal leaves only the literal, which a loop around the literal may
// call again.
func repeats(path []ast.Node) bool {
	inLiteral := false // a function literal lies between the call and path[i]
	for i := len(path) - 2; i >= 0; i-- {
		child := path[i+1]
		switch l := path[i].(type) {
		case *ast.FuncLit:
			inLiteral = true
		case *ast.ForStmt:
			if child == l.Init {
				continue // runs once, before the loop
			}
			if inLiteral || child == l.Cond || child == l.Post || !returnsAfter(path[i+1:]) {
				return true
			}
		case *ast.RangeStmt:
			if child != l.Body {
				continue // the range expression is evaluated once
			}
			if inLiteral || !returnsAfter(path[i+1:]) {
				return true
			}
		}
	}
	return false
}

// returnsAfter reports whether, in a loop body and the path down from it
// to a call (the call last), the function provably returns after the call
// before the loop could run the call again: at some level between the
// call and the body, a return statement follows the statement holding the
// call in its list, and neither that statement nor those between can jump
// (continue, break, goto, fallthrough). A function literal on the path
// ends the proof: its return leaves only the literal.
func returnsAfter(path []ast.Node) bool {
	for i := len(path) - 2; i >= 0; i-- {
		var list []ast.Stmt
		switch n := path[i].(type) {
		case *ast.FuncLit:
			return false
		case *ast.BlockStmt:
			list = n.List
		case *ast.CaseClause:
			list = n.Body
		case *ast.CommClause:
			list = n.Body
		default:
			continue
		}
		holder, ok := path[i+1].(ast.Stmt)
		if !ok {
			continue // a case clause's expression
		}
		at := -1
		for j, s := range list {
			if s == holder {
				at = j
			}
		}
		if at < 0 || jumps(holder) {
			return false
		}
		for _, s := range list[at+1:] {
			if _, ok := s.(*ast.ReturnStmt); ok {
				return true
			}
			if jumps(s) {
				return false
			}
		}
	}
	return false
}

// jumps reports whether a statement holds a branch statement or a label,
// outside function literals.
func jumps(s ast.Stmt) bool {
	found := false
	ast.Inspect(s, func(n ast.Node) bool {
		switch n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.BranchStmt, *ast.LabeledStmt:
			found = true
		}
		return !found
	})
	return found
}
