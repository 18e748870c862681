package determinism

import (
	"go/ast"
	"go/token"
	"go/types"
)

// sorts are the functions that sort the slice they are given first.
var sorts = set("sort.Strings", "sort.Ints", "sort.Float64s", "sort.Slice", "sort.SliceStable",
	"sort.Sort", "sort.Stable", "slices.Sort", "slices.SortFunc", "slices.SortStableFunc")

// orderFree reports whether the body of a range over a map cannot depend
// on the order of iteration: each of its statements only
//
//   - adds integers (x += e, x++, counts[k]++, and -=, *=, |=, &=, ^=),
//   - writes the entry of a map keyed by the loop's key (when keyed), or
//     any entry with a constant value (a set), or deletes the key,
//   - appends to a slice that the statements right after the loop sort,
//   - or is an if (without init) or continue around those,
//
// and no statement reads a variable another writes. The loop must define
// its variables (:=), or their last values would depend on the order.
func (w *walker) orderFree(rs *ast.RangeStmt, keyed bool) bool {
	if rs.Tok == token.ASSIGN && (!blank(rs.Key) || !blank(rs.Value)) {
		return false
	}
	c := &orderCheck{walker: w, written: map[types.Object]bool{}}
	if keyed {
		if id, ok := rs.Key.(*ast.Ident); ok && id.Name != "_" {
			c.key = w.info.Defs[id]
		}
	}
	if !c.stmts(rs.Body.List) {
		return false
	}
	for _, e := range c.reads {
		if c.readsWritten(e) {
			return false
		}
	}
	sorted := map[types.Object]bool{}
	for _, s := range w.after[rs] {
		obj := w.sorted(s)
		if obj == nil {
			break
		}
		sorted[obj] = true
	}
	for _, obj := range c.appended {
		if !sorted[obj] {
			return false
		}
	}
	return true
}

func blank(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return e == nil || ok && id.Name == "_"
}

// orderCheck collects what a range body writes and reads.
type orderCheck struct {
	*walker
	// key is the loop's key variable, distinct in every iteration, or nil.
	key types.Object
	// written are the variables the body writes, appended the slices it
	// appends to.
	written  map[types.Object]bool
	appended []types.Object
	// reads are the expressions the body reads.
	reads []ast.Expr
}

func (c *orderCheck) stmts(list []ast.Stmt) bool {
	for _, s := range list {
		if !c.stmt(s) {
			return false
		}
	}
	return true
}

func (c *orderCheck) stmt(s ast.Stmt) bool {
	switch s := s.(type) {
	case *ast.EmptyStmt:
		return true
	case *ast.BranchStmt:
		return s.Tok == token.CONTINUE && s.Label == nil
	case *ast.BlockStmt:
		return c.stmts(s.List)
	case *ast.IfStmt:
		if s.Init != nil {
			return false
		}
		c.reads = append(c.reads, s.Cond)
		return c.stmt(s.Body) && (s.Else == nil || c.stmt(s.Else))
	case *ast.IncDecStmt:
		return c.sum(s.X)
	case *ast.AssignStmt:
		if len(s.Lhs) != 1 || len(s.Rhs) != 1 {
			return false
		}
		lhs, rhs := ast.Unparen(s.Lhs[0]), s.Rhs[0]
		switch s.Tok {
		case token.ADD_ASSIGN, token.SUB_ASSIGN, token.MUL_ASSIGN, token.OR_ASSIGN, token.AND_ASSIGN, token.XOR_ASSIGN:
			c.reads = append(c.reads, rhs)
			return c.sum(lhs)
		case token.ASSIGN:
			if id, ok := lhs.(*ast.Ident); ok {
				return c.appendTo(id, rhs)
			}
			if ix, ok := lhs.(*ast.IndexExpr); ok {
				return c.mapWrite(ix, rhs)
			}
		}
	case *ast.ExprStmt:
		// delete(m, k) of the loop's key.
		call, ok := ast.Unparen(s.X).(*ast.CallExpr)
		if !ok || !c.builtin(call.Fun, "delete") || len(call.Args) != 2 || !c.isKey(call.Args[1]) {
			return false
		}
		return c.target(call.Args[0])
	}
	return false
}

// sum accepts an integer accumulator: integer addition and the like give
// the same total in any order (floating-point addition does not).
func (c *orderCheck) sum(x ast.Expr) bool {
	t := c.info.TypeOf(x)
	if t == nil {
		return false
	}
	b, ok := t.Underlying().(*types.Basic)
	if !ok || b.Info()&types.IsInteger == 0 {
		return false
	}
	if ix, ok := ast.Unparen(x).(*ast.IndexExpr); ok {
		// counts[e] += n: the count of each entry is a sum too.
		c.reads = append(c.reads, ix.Index)
		return c.target(ix.X)
	}
	return c.target(x)
}

// appendTo accepts s = append(s, e...).
func (c *orderCheck) appendTo(s *ast.Ident, rhs ast.Expr) bool {
	call, ok := ast.Unparen(rhs).(*ast.CallExpr)
	if !ok || !c.builtin(call.Fun, "append") || len(call.Args) == 0 {
		return false
	}
	first, ok := ast.Unparen(call.Args[0]).(*ast.Ident)
	obj := c.info.Uses[s]
	if !ok || obj == nil || c.info.Uses[first] != obj {
		return false
	}
	c.reads = append(c.reads, call.Args[1:]...)
	c.appended = append(c.appended, obj)
	c.written[obj] = true
	return true
}

// mapWrite accepts m[k] = e with k the loop's key, and m[e] = constant.
func (c *orderCheck) mapWrite(ix *ast.IndexExpr, rhs ast.Expr) bool {
	t := c.info.TypeOf(ix.X)
	if t == nil {
		return false
	}
	if _, ok := t.Underlying().(*types.Map); !ok {
		return false
	}
	if !c.isKey(ix.Index) && !c.constant(rhs) {
		return false
	}
	c.reads = append(c.reads, ix.Index, rhs)
	return c.target(ix.X)
}

// target records the variable an accumulator or map belongs to as
// written; it accepts variables and their fields.
func (c *orderCheck) target(x ast.Expr) bool {
	for {
		switch e := ast.Unparen(x).(type) {
		case *ast.Ident:
			obj := c.info.Uses[e]
			if obj == nil {
				return false
			}
			c.written[obj] = true
			return true
		case *ast.SelectorExpr:
			if s, ok := c.info.Selections[e]; ok && s.Kind() == types.FieldVal {
				x = e.X
				continue
			}
			if obj := c.info.Uses[e.Sel]; obj != nil {
				// A qualified package variable.
				c.written[obj] = true
				return true
			}
			return false
		default:
			return false
		}
	}
}

// isKey reports whether e is the loop's key variable.
func (c *orderCheck) isKey(e ast.Expr) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && c.key != nil && c.info.Uses[id] == c.key
}

// constant reports whether e is a constant, or an empty composite literal
// (struct{}{}): the same value in every iteration.
func (c *orderCheck) constant(e ast.Expr) bool {
	if tv, ok := c.info.Types[e]; ok && tv.Value != nil {
		return true
	}
	lit, ok := ast.Unparen(e).(*ast.CompositeLit)
	return ok && len(lit.Elts) == 0
}

// builtin reports whether fun names the builtin function name.
func (c *orderCheck) builtin(fun ast.Expr, name string) bool {
	id, ok := ast.Unparen(fun).(*ast.Ident)
	if !ok {
		return false
	}
	b, ok := c.info.Uses[id].(*types.Builtin)
	return ok && b.Name() == name
}

// readsWritten reports whether e reads a variable the body writes.
func (c *orderCheck) readsWritten(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && c.written[c.info.Uses[id]] {
			found = true
		}
		return !found
	})
	return found
}

// sorted returns the slice variable a statement sorts, or nil.
func (w *walker) sorted(s ast.Stmt) types.Object {
	es, ok := s.(*ast.ExprStmt)
	if !ok {
		return nil
	}
	call, ok := ast.Unparen(es.X).(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return nil
	}
	fn := w.callee(call)
	if fn == nil || !sorts[fn.FullName()] {
		return nil
	}
	arg := ast.Unparen(call.Args[0])
	// sort.Sort(sort.StringSlice(keys)): look through conversions.
	for {
		conv, ok := arg.(*ast.CallExpr)
		if !ok || len(conv.Args) != 1 {
			break
		}
		if tv, ok := w.info.Types[conv.Fun]; !ok || !tv.IsType() {
			break
		}
		arg = ast.Unparen(conv.Args[0])
	}
	id, ok := arg.(*ast.Ident)
	if !ok {
		return nil
	}
	return w.info.Uses[id]
}
