package gen

import (
	"cmp"
	"fmt"
	"go/types"
	"reflect"
	"slices"
	"strings"
)

// ShapeGuard is a named type that is part of a durable payload (a
// workflow's input, output or progress, a step's inputs or output, an
// event, or a type inside one of those), which the generated file guards:
// it declares the type's underlying type as it is now and converts a value
// of the type to it, so the file stops compiling when the type's fields
// change until go generate has judged the change for runs in flight.
type ShapeGuard struct {
	// Type is the named type, Name how messages write it (relative to the
	// package: Order, money.Amount, Page[Item]).
	Type *Type
	Name string
	// Underlying is the type's underlying type, with every field, embedded
	// field and tag in order: what the guard declares.
	Underlying *Type
	// Basic: the underlying type is predeclared (string, int64, ...), which
	// a value of the type is not assignable to; the guard converts a
	// pointer instead, which needs the same underlying type.
	Basic bool
	// Composite: the type's zero value is written T{} (a struct or an
	// array), else T(nil).
	Composite bool
	// Skip says why the type has no guard (the generated file cannot name
	// its fields or their types), or is "".
	Skip string
	// key names the type by import paths, apart from every other.
	key string
}

// shapeGuards returns the guards of the named types reachable from the
// payload types roots along what their JSON shape depends on (the types
// that encode themselves end it), sorted by name.
func (b *builder) shapeGuards(roots []types.Type) []*ShapeGuard {
	seen := map[string]bool{}
	var out []*ShapeGuard
	var visit func(t types.Type)
	visit = func(t types.Type) {
		t = types.Unalias(t)
		if n, ok := t.(*types.Named); ok {
			if marshaler(n) || n.Obj().Pkg() == nil || n.TypeParams().Len() > n.TypeArgs().Len() {
				return
			}
			key := types.TypeString(n, nil)
			if seen[key] {
				return
			}
			seen[key] = true
			out = append(out, b.shapeGuard(n))
		}
		switch u := t.Underlying().(type) {
		case *types.Pointer:
			visit(u.Elem())
		case *types.Slice:
			visit(u.Elem())
		case *types.Array:
			visit(u.Elem())
		case *types.Map:
			visit(u.Key())
			visit(u.Elem())
		case *types.Struct:
			for i := range u.NumFields() {
				f := u.Field(i)
				name, opts, _ := strings.Cut(reflect.StructTag(u.Tag(i)).Get("json"), ",")
				if name == "-" && opts == "" || !f.Exported() && !f.Embedded() {
					continue // not part of the JSON encoding
				}
				visit(f.Type())
			}
		}
	}
	for _, t := range roots {
		if validType(t) {
			visit(t)
		}
	}
	slices.SortFunc(out, func(x, y *ShapeGuard) int {
		return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.key, y.key))
	})
	return out
}

// shapeGuard builds the guard of named type n.
func (b *builder) shapeGuard(n *types.Named) *ShapeGuard {
	g := &ShapeGuard{Type: b.typ(n), Name: b.short(n), key: types.TypeString(n, nil)}
	u := n.Underlying()
	switch {
	case !b.nameableObj(n.Obj()):
		g.Skip = "its package does not export it to this package, so this package cannot name it"
		return g
	case !b.nameable(n):
		g.Skip = "its package does not export a type argument of it, so this package cannot name it"
		return g
	case !b.nameable(u):
		g.Skip = "this package cannot name all its fields"
		if st, ok := u.(*types.Struct); ok {
			for i := range st.NumFields() {
				f := st.Field(i)
				if !f.Exported() && f.Pkg() != b.pkg {
					g.Skip = fmt.Sprintf("its field %s is unexported, which this package cannot name", f.Name())
					break
				}
				if !b.nameable(f.Type()) {
					g.Skip = fmt.Sprintf("the type of its field %s is not exported to this package, so this package cannot name it", f.Name())
					break
				}
			}
		}
		return g
	}
	g.Underlying = b.typ(u)
	switch u.(type) {
	case *types.Basic:
		g.Basic = true
	case *types.Struct, *types.Array:
		g.Composite = true
	case *types.Slice, *types.Map, *types.Pointer:
	default:
		g.Skip = "its kind is not a JSON payload's" // reported by check
		g.Underlying = nil
	}
	return g
}

// short writes a type for a comment in the generated file: by package
// name, as the file's code writes it (Page[pgtype.Text]), the package's own
// types unqualified.
func (b *builder) short(t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string {
		if p == b.pkg {
			return ""
		}
		return p.Name()
	})
}

// nameable reports whether the generated file, in the package, can write
// type t: every named type in it is the package's own or exported, and so
// is every field of a struct in it.
func (b *builder) nameable(t types.Type) bool {
	switch t := t.(type) {
	case *types.Alias:
		return b.nameableObj(t.Obj()) && b.nameableList(t.TypeArgs())
	case *types.Named:
		return b.nameableObj(t.Obj()) && b.nameableList(t.TypeArgs())
	case *types.Basic:
		return true
	case *types.Pointer:
		return b.nameable(t.Elem())
	case *types.Slice:
		return b.nameable(t.Elem())
	case *types.Array:
		return b.nameable(t.Elem())
	case *types.Map:
		return b.nameable(t.Key()) && b.nameable(t.Elem())
	case *types.Struct:
		for i := range t.NumFields() {
			f := t.Field(i)
			if !f.Exported() && f.Pkg() != b.pkg || !b.nameable(f.Type()) {
				return false
			}
		}
		return true
	}
	return false // type parameters, and what a payload cannot hold
}

func (b *builder) nameableObj(obj *types.TypeName) bool {
	return obj.Pkg() == nil || obj.Pkg() == b.pkg || obj.Exported() && importable(b.pkg.Path(), obj.Pkg().Path())
}

// importable reports whether the package at path from may import the one
// at path to, as far as internal directories go: only code in the tree
// rooted at an internal directory's parent may.
func importable(from, to string) bool {
	elems := strings.Split(to, "/")
	for i, e := range elems {
		if e != "internal" {
			continue
		}
		// An internal directory at the root is the standard library's,
		// which generated code is not part of.
		parent := strings.Join(elems[:i], "/")
		if parent == "" || from != parent && !strings.HasPrefix(from, parent+"/") {
			return false
		}
	}
	return true
}

func (b *builder) nameableList(args *types.TypeList) bool {
	for i := range args.Len() {
		if !b.nameable(args.At(i)) {
			return false
		}
	}
	return true
}
