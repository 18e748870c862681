package gen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLocals checks that locals lists every identifier the generated files
// of the testdata cases declare inside their functions (receivers,
// parameters, variables, types), other than the parameters named after
// the user's (argN, or the user's own names) and those renamed apart from
// the package's names (with _ after): a package type with such a
// name is written through an alias, so one missing from the list would
// let a local hide a payload type again.
func TestLocals(t *testing.T) {
	wants, err := filepath.Glob(filepath.Join("testdata", "*", "want", GenFileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(wants) == 0 {
		t.Fatal("no generated files in testdata")
	}
	argN := regexp.MustCompile(`^arg[0-9]+_*$`)
	missing := map[string][]string{}
	for _, want := range wants {
		caseDir := filepath.Dir(filepath.Dir(want))
		user := userParams(t, caseDir)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, want, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		declared := func(id *ast.Ident) {
			// A local renamed apart from the package's own names
			// (shapeAtLastGoGenerate_) is its listed name with _ after.
			n := id.Name
			if base := strings.TrimRight(n, "_"); n == "_" || locals[base] || argN.MatchString(n) || user[n] {
				return
			}
			if c := filepath.Base(caseDir); !slices.Contains(missing[n], c) {
				missing[n] = append(missing[n], c)
			}
		}
		fields := func(fl *ast.FieldList) {
			if fl == nil {
				return
			}
			for _, fd := range fl.List {
				for _, id := range fd.Names {
					declared(id)
				}
			}
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			fields(fd.Recv)
			fields(fd.Type.Params)
			fields(fd.Type.Results)
			if fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncLit:
					fields(n.Type.Params)
					fields(n.Type.Results)
				case *ast.AssignStmt:
					if n.Tok == token.DEFINE {
						for _, l := range n.Lhs {
							if id, ok := l.(*ast.Ident); ok {
								declared(id)
							}
						}
					}
				case *ast.RangeStmt:
					if n.Tok == token.DEFINE {
						for _, l := range []ast.Expr{n.Key, n.Value} {
							if id, ok := l.(*ast.Ident); ok {
								declared(id)
							}
						}
					}
				case *ast.ValueSpec:
					for _, id := range n.Names {
						declared(id)
					}
				case *ast.TypeSpec:
					declared(n.Name)
				}
				return true
			})
		}
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range missing {
			if !yield(n) {
				return
			}
		}
	}) {
		t.Errorf("generated code declares %s inside a function (cases %s), but locals does not list it", n, strings.Join(missing[n], ", "))
	}
}

// userParams returns the parameter names of the functions a case declares.
func userParams(t *testing.T, caseDir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(caseDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
		if err != nil {
			continue // a case about files that do not parse
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ft, ok := n.(*ast.FuncType); ok && ft.Params != nil {
				for _, fd := range ft.Params.List {
					for _, id := range fd.Names {
						names[id.Name] = true
					}
				}
			}
			return true
		})
	}
	return names
}
