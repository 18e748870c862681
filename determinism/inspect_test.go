package determinism_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"

	"github.com/stemflow/stem/determinism"
)

// firstGeneration is a workflow package before stemgen's first run: the
// context type and its methods do not exist yet.
const firstGeneration = `package orders

import "time"

//stem:workflow name=orders.fulfil
func Fulfil(ctx *FulfilContext, items map[string]int) (string, error) {
	_ = time.Now()
	if err := ctx.Sleep("cool-off", time.Minute); err != nil {
		return "", err
	}
	lines := ctx.Lines() //stem:allow map
	for k := range lines {
		ctx.Pack(k)
	}
	for k := range items {
		ctx.Pack(k)
	}
	go ctx.Pack("x")
	return "", nil
}
`

// TestInspectIncompleteTypes checks what Inspect makes of a package whose
// generated identifiers are missing: it reports what it resolves and
// nothing it cannot, and says nothing of an allow comment on a line it
// cannot judge.
func TestInspectIncompleteTypes(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "orders.go", firstGeneration, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	var typeErrors int
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil), Error: func(error) { typeErrors++ }}
	pkg, _ := conf.Check("example.com/orders", fset, []*ast.File{f}, info)
	if typeErrors == 0 {
		t.Fatal("the package type-checks: the test needs missing identifiers")
	}
	var got []string
	for _, fd := range determinism.Inspect(fset, []*ast.File{f}, pkg, info) {
		got = append(got, fset.Position(fd.Pos).String()+": "+fd.Kind+": "+strings.SplitN(fd.Message, ":", 2)[0])
	}
	want := []string{
		"orders.go:7:6: time: time.Now in workflow orders.fulfil",
		"orders.go:15:2: map: range over a map in workflow orders.fulfil",
		"orders.go:18:2: goroutine: go statement in workflow orders.fulfil",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Without any type information, only the syntax is judged.
	got = got[:0]
	for _, fd := range determinism.Inspect(fset, []*ast.File{f}, nil, nil) {
		got = append(got, fset.Position(fd.Pos).String()+": "+fd.Kind)
	}
	if want := "orders.go:18:2: goroutine"; strings.Join(got, "\n") != want {
		t.Errorf("findings without types:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}
