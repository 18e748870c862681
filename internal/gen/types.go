package gen

import (
	"cmp"
	"fmt"
	"go/types"
	"reflect"
	"slices"
	"strings"
)

// TypeKind says what a Type is.
type TypeKind int

// The kinds of Type.
const (
	KindNamed   TypeKind = iota // Path.Name[Args] (Path "" for predeclared names such as error)
	KindBasic                   // Name
	KindPointer                 // *Elem
	KindSlice                   // []Elem
	KindArray                   // [Len]Elem
	KindMap                     // map[Key]Elem
	KindStruct                  // struct{Fields}
	KindOther                   // anything else (rejected by check), Name is its Go syntax
)

// Type is a Go type as render needs it: enough to write it in the
// generated file, qualified by import path.
type Type struct {
	Kind       TypeKind
	Path, Name string
	// Pkg is the name of the package at Path.
	Pkg       string
	Args      []*Type
	Key, Elem *Type
	Len       int64
	Fields    []Field
}

// Field is a field of a struct type literal.
type Field struct {
	Name     string
	Type     *Type
	Embedded bool
	Tag      string
}

// Paths returns the import paths the type refers to.
func (t *Type) Paths(add func(path, name string)) {
	if t == nil {
		return
	}
	if t.Kind == KindNamed && t.Path != "" {
		add(t.Path, t.Pkg)
	}
	for _, a := range t.Args {
		a.Paths(add)
	}
	t.Key.Paths(add)
	t.Elem.Paths(add)
	for _, f := range t.Fields {
		f.Type.Paths(add)
	}
}

// typ converts a go/types type to the model.
func (b *builder) typ(t types.Type) *Type {
	switch t := t.(type) {
	case *types.Alias:
		return b.named(t.Obj(), t.TypeArgs())
	case *types.Named:
		return b.named(t.Obj(), t.TypeArgs())
	case *types.TypeParam:
		return &Type{Kind: KindNamed, Name: t.Obj().Name()}
	case *types.Basic:
		return &Type{Kind: KindBasic, Name: t.Name()}
	case *types.Pointer:
		return &Type{Kind: KindPointer, Elem: b.typ(t.Elem())}
	case *types.Slice:
		return &Type{Kind: KindSlice, Elem: b.typ(t.Elem())}
	case *types.Array:
		return &Type{Kind: KindArray, Len: t.Len(), Elem: b.typ(t.Elem())}
	case *types.Map:
		return &Type{Kind: KindMap, Key: b.typ(t.Key()), Elem: b.typ(t.Elem())}
	case *types.Struct:
		st := &Type{Kind: KindStruct}
		for i := range t.NumFields() {
			f := t.Field(i)
			st.Fields = append(st.Fields, Field{Name: f.Name(), Type: b.typ(f.Type()), Embedded: f.Embedded(), Tag: t.Tag(i)})
		}
		return st
	}
	return &Type{Kind: KindOther, Name: b.describe(t)}
}

func (b *builder) named(obj *types.TypeName, args *types.TypeList) *Type {
	n := &Type{Kind: KindNamed, Name: obj.Name()}
	if obj.Pkg() != nil {
		n.Path, n.Pkg = obj.Pkg().Path(), obj.Pkg().Name()
	}
	for i := range args.Len() {
		n.Args = append(n.Args, b.typ(args.At(i)))
	}
	return n
}

// marshaler reports whether values of t encode themselves (json.Marshaler
// or encoding.TextMarshaler, on T or *T).
func marshaler(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	ms := types.NewMethodSet(types.NewPointer(n))
	return ms.Lookup(nil, "MarshalJSON") != nil || ms.Lookup(nil, "MarshalText") != nil
}

// textKey reports whether a map key type encodes as a JSON object key.
func textKey(t types.Type) bool {
	if b, ok := t.Underlying().(*types.Basic); ok {
		return b.Info()&(types.IsString|types.IsInteger) != 0
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && types.NewMethodSet(types.NewPointer(n)).Lookup(nil, "MarshalText") != nil
}

// problem returns why t cannot be a JSON payload, or "".
func (b *builder) problem(t types.Type) string {
	return b.problemAt(t, "", map[*types.Named]bool{}, false)
}

// problemAt checks t, found at path from the payload's root; an embedded
// struct may have no exported fields (it then contributes none).
func (b *builder) problemAt(t types.Type, path string, seen map[*types.Named]bool, embedded bool) string {
	where := func(format string, args ...any) string {
		what := fmt.Sprintf(format, args...)
		switch {
		case path == "":
			return fmt.Sprintf("%s %s", b.describe(t), what)
		case strings.HasPrefix(path, "["):
			return fmt.Sprintf("its element %s (%s) %s", path, b.describe(t), what)
		}
		return fmt.Sprintf("its field %s (%s) %s", path, b.describe(t), what)
	}
	t = types.Unalias(t)
	switch n := t.(type) {
	case *types.TypeParam:
		return "" // reported as a type parameter
	case *types.Named:
		if marshaler(n) || seen[n] {
			return ""
		}
		seen[n] = true
		defer delete(seen, n)
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsComplex != 0:
			return where("is a complex number, which JSON cannot encode")
		case u.Kind() == types.UnsafePointer:
			return where("is an unsafe.Pointer, which JSON cannot encode")
		}
	case *types.Chan:
		return where("is a channel, which JSON cannot encode")
	case *types.Signature:
		return where("is a func, which JSON cannot encode")
	case *types.Interface:
		return where("is an interface; a payload needs a concrete type")
	case *types.Pointer:
		return b.problemAt(u.Elem(), path, seen, embedded)
	case *types.Slice:
		return b.problemAt(u.Elem(), path+"[]", seen, false)
	case *types.Array:
		return b.problemAt(u.Elem(), path+"[]", seen, false)
	case *types.Map:
		if !textKey(u.Key()) {
			return where("is a map with key type %s; JSON object keys need a string, an integer or an encoding.TextMarshaler", b.describe(u.Key()))
		}
		return b.problemAt(u.Elem(), path+"[key]", seen, false)
	case *types.Struct:
		encoded := 0
		for i := range u.NumFields() {
			f := u.Field(i)
			name, _, _ := strings.Cut(reflect.StructTag(u.Tag(i)).Get("json"), ",")
			if name == "-" || !f.Exported() && !f.Embedded() {
				continue
			}
			encoded++
			sub := f.Name()
			if path != "" {
				sub = path + "." + sub
			}
			if p := b.problemAt(f.Type(), sub, seen, f.Embedded()); p != "" {
				return p
			}
		}
		if u.NumFields() > 0 && encoded == 0 && !embedded {
			return where("is a struct with no exported fields, which JSON encodes as {}")
		}
	}
	return ""
}

// shape returns the canonical JSON shape of t, which the manifest records:
// what a stored payload of the type looks like, independent of Go names.
// Structs list their JSON field names in order, with the fields of embedded
// structs promoted; pointers have their element's shape; numbers are
// named by size (int32, uint8, float64; int and uint are Go's), strings and
// bools are string and bool; types that encode themselves are named by
// import path.
func (b *builder) shape(t types.Type) string {
	return b.shapeOf(t, map[*types.Named]bool{})
}

func (b *builder) shapeOf(t types.Type, seen map[*types.Named]bool) string {
	t = types.Unalias(t)
	if n, ok := t.(*types.Named); ok {
		if marshaler(n) || n.Obj().Pkg() == nil {
			return qualified(n)
		}
		if seen[n] {
			return "@" + qualified(n)
		}
		seen[n] = true
		defer delete(seen, n)
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		if n, ok := numberShapes[u.Kind()]; ok {
			return n
		}
		switch i := u.Info(); {
		case i&types.IsBoolean != 0:
			return "bool"
		case i&types.IsString != 0:
			return "string"
		}
		return u.Name()
	case *types.Pointer:
		return b.shapeOf(u.Elem(), seen)
	case *types.Slice:
		if e, ok := u.Elem().Underlying().(*types.Basic); ok && e.Kind() == types.Uint8 && !marshaler(u.Elem()) {
			return "bytes"
		}
		return "[]" + b.shapeOf(u.Elem(), seen)
	case *types.Array:
		return fmt.Sprintf("[%d]%s", u.Len(), b.shapeOf(u.Elem(), seen))
	case *types.Map:
		return "map[" + b.shapeOf(u.Key(), seen) + "]" + b.shapeOf(u.Elem(), seen)
	case *types.Struct:
		fields := b.jsonFields(u, seen, 0)
		parts := make([]string, len(fields))
		for i, f := range fields {
			parts[i] = f.name + ":" + f.shape
		}
		return "{" + strings.Join(parts, ",") + "}"
	case *types.Interface:
		return "any"
	}
	return b.describe(t)
}

// numberShapes are the shapes of Go's numbers: by size, which decides
// which values decode; int and uint are Go's (uintptr is a uint of the
// same size).
var numberShapes = map[types.BasicKind]string{
	types.Int: "int", types.Int8: "int8", types.Int16: "int16", types.Int32: "int32", types.Int64: "int64",
	types.Uint: "uint", types.Uintptr: "uint", types.Uint8: "uint8", types.Uint16: "uint16", types.Uint32: "uint32", types.Uint64: "uint64",
	types.Float32: "float32", types.Float64: "float64",
}

// qualified names a named type by import path.
func qualified(n *types.Named) string {
	if n.Obj().Pkg() == nil {
		return n.Obj().Name()
	}
	return n.Obj().Pkg().Path() + "." + n.Obj().Name()
}

type jsonField struct {
	name, shape string
	depth       int
	tagged      bool
}

// jsonFields returns the fields encoding/json encodes for a struct, sorted
// by name, with embedded structs promoted by its rules: the shallowest
// field of a name wins, then a tagged one; otherwise the name is dropped.
func (b *builder) jsonFields(st *types.Struct, seen map[*types.Named]bool, depth int) []jsonField {
	var all []jsonField
	for i := range st.NumFields() {
		f := st.Field(i)
		name, opts, _ := strings.Cut(reflect.StructTag(st.Tag(i)).Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Embedded() && name == "" {
			ft := types.Unalias(f.Type())
			if p, ok := ft.(*types.Pointer); ok {
				ft = types.Unalias(p.Elem())
			}
			if inner, ok := ft.Underlying().(*types.Struct); ok && !marshaler(ft) {
				n, _ := ft.(*types.Named)
				if n != nil && seen[n] {
					continue
				}
				if n != nil {
					seen[n] = true
				}
				all = append(all, b.jsonFields(inner, seen, depth+1)...)
				if n != nil {
					delete(seen, n)
				}
				continue
			}
		}
		if !f.Exported() {
			continue
		}
		jf := jsonField{name: f.Name(), depth: depth, tagged: name != ""}
		if name != "" {
			jf.name = name
		}
		jf.shape = b.shapeOf(f.Type(), seen)
		if strings.Contains(","+opts+",", ",string,") {
			if bt, ok := types.Unalias(f.Type()).Underlying().(*types.Basic); ok && bt.Info()&(types.IsNumeric|types.IsBoolean|types.IsString) != 0 {
				jf.shape = "string"
			}
		}
		all = append(all, jf)
	}
	if depth > 0 {
		return all
	}
	slices.SortStableFunc(all, func(x, y jsonField) int {
		return cmp.Or(cmp.Compare(x.name, y.name), cmp.Compare(x.depth, y.depth), boolCmp(y.tagged, x.tagged))
	})
	var out []jsonField
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].name == all[i].name {
			j++
		}
		// all[i] is the best of its name; it wins unless another is as good.
		if j == i+1 || all[i+1].depth != all[i].depth || all[i+1].tagged != all[i].tagged {
			out = append(out, all[i])
		}
		i = j
	}
	return out
}

func boolCmp(x, y bool) int {
	switch {
	case x == y:
		return 0
	case x:
		return 1
	}
	return -1
}
