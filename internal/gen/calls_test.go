package gen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// ctxCalls finds the calls on the context parameter and says which may
// run more than once: in a loop's body, condition or post statement, or a
// function literal there, unless a return follows the call in the loop
// with no jump between.
func TestCtxCalls(t *testing.T) {
	for _, c := range []struct {
		body string
		want string // each call: Method, with * when in a loop
	}{
		{`ctx.A(); ctx.B()`, "A B"},
		{`for { ctx.A() }`, "A*"},
		{`for _, x := range xs { ctx.A(x) }`, "A*"},
		{`for range ctx.A() {}`, "A"},
		{`for i := ctx.A(); ctx.B(i); ctx.C() { }`, "A B* C*"},
		{`for { ctx.A(); return }`, "A"},
		{`for { if _, err := ctx.A(); err != nil { return err }; return nil }`, "A"},
		{`for { if _, err := ctx.A(); err != nil { continue }; return nil }`, "A*"},
		{`for { ctx.A(); if c { break }; return }`, "A*"},
		{`for { if c { ctx.A() }; return }`, "A"},
		{`for { if c { ctx.A() } else { continue }; return }`, "A*"},
		{`for { switch { case c: ctx.A(); return } }`, "A"},
		{`for { select { case <-ch: ctx.A(); return } }`, "A"},
		{`L: for { ctx.A(); break L }`, "A*"},
		{`for { for { ctx.A(); return } }`, "A"},
		{`for { func() { ctx.A() }() }`, "A*"},
		{`for { func() { ctx.A(); return }() }`, "A*"},
		{`func() { for { ctx.A(); return } }()`, "A"},
		{`for { func() { for { ctx.A(); return } }() }`, "A*"},
		{`for { (ctx).A(); other.B() }`, "A*"},
		{`for { x := ctx.A; x() }`, ""},
	} {
		src := "package p\nfunc f(ctx *C) error {\n" + c.body + "\n}"
		f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		var got []string
		for _, call := range ctxCalls(f.Decls[0].(*ast.FuncDecl).Body, "ctx") {
			s := call.Method
			if call.InLoop {
				s += "*"
			}
			got = append(got, s)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: calls %q, want %q", c.body, strings.Join(got, " "), c.want)
		}
	}
	if calls := ctxCalls(&ast.BlockStmt{}, "_"); calls != nil {
		t.Errorf("a blank context has calls: %v", calls)
	}
}
