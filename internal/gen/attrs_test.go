package gen

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"slices"
	"testing"
)

// The types below are both compiled into the test and type-checked from
// this file's source: encodedFields, reading them with go/types, must
// name the fields encoding/json encodes for them.

type jfBase struct {
	ID   string
	Name string `json:"name"`
}

type jfOther struct {
	ID   string
	Name string
}

type jfTagged struct {
	Code string
}

type jfText string

type jfConflict struct {
	jfBase
	jfOther
	Own string
}

type jfDominant struct {
	jfBase
	ID    int
	Extra string `json:"-"`
	Dash  string `json:"-,"`
	Bad   string `json:"a\"b"`
}

type jfNested struct {
	jfTagged `json:"tagged"`
	jfText
	jfInner
}

type jfInner struct {
	jfTagged
	Depth string
}

type jfTwice struct {
	A jfTwiceA
	jfTwiceA
	jfTwiceB
}

type jfTwiceA struct{ jfTagged }

type jfTwiceB struct{ jfTagged }

type jfTagWins struct {
	jfTwiceA
	jfLabel
}

type jfLabel struct {
	Code string `json:"Code"`
	ID   string
}

func TestEncodedFields(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "attrs_test.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	// Only the type declarations, which need no import.
	var decls []ast.Decl
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
			decls = append(decls, g)
		}
	}
	f.Decls, f.Imports = decls, nil
	pkg, err := (&types.Config{}).Check("gen", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{jfConflict{}, jfDominant{}, jfNested{}, jfTwice{}, jfTagWins{}, jfInner{}} {
		name := reflect.TypeOf(v).Name()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		var want []string
		for k := range obj {
			want = append(want, k)
		}
		slices.Sort(want)
		var got []string
		for _, ef := range encodedFields(pkg.Scope().Lookup(name).Type()) {
			got = append(got, ef.name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: encodedFields names %q; encoding/json writes %q (%s)", name, got, want, b)
		}
	}
}

func TestAttrGoName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"customer":     "Customer",
		"order.id":     "OrderID",
		"paid_at":      "PaidAt",
		"shipping-url": "ShippingURL",
		"a..b":         "AB",
		"2fa":          "2fa",
		"Stage":        "Stage",
		"http_status":  "HTTPStatus",
		"ids":          "Ids",
	} {
		if got := attrGoName(name); got != want {
			t.Errorf("attrGoName(%q) = %q, want %q", name, got, want)
		}
	}
}
