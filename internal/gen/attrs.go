package gen

import (
	"cmp"
	"fmt"
	"go/token"
	"go/types"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"github.com/dave/jennifer/jen"

	"github.com/stemflow/stem/annotations"
	"github.com/stemflow/stem/storage"
)

// Search attributes (//stem:attr): each follows a workflow's
// //stem:workflow and declares a typed, named value stored with each run
// of the workflow, which listings filter on. One with from= is taken from
// the run's input at its start, by the runtime, from the input's JSON at
// the path the generated Register records; every one gets a typed setter
// on the workflow's context, a durable call.
//
// The model resolves from= here, from go/types, the way encoding/json
// encodes the input (json tags, embedded structs promoted by its rules),
// into the JSON path and the attribute's type; check reports what cannot
// be; render writes the declarations and the setters.

// Attr is a search attribute a workflow declares with //stem:attr.
type Attr struct {
	Ann *annotations.Attr
	// Type is the attribute's type: the type of the field from= names when
	// it resolved, else type= ("" when neither is known).
	Type storage.AttrType
	// JSONPath is the path of the input's field in the input's JSON, keys
	// joined by '.' ("customer.id"), when from= resolved; "" without
	// from=.
	JSONPath string
	// FieldType is the Go type of the field from= names, relative to the
	// package, for messages.
	FieldType string
	// Problem says why from= names no field the attribute can be taken
	// from, at ProblemPos; "" when it resolved (or there is no from=).
	Problem    string
	ProblemPos token.Pos
}

// attrs builds the models of a workflow's //stem:attr directives, in the
// order written, resolving each from= against the workflow's input type
// in (nil when the workflow's signature did not give one: check reports
// the signature, and from= is then left unresolved).
func (b *builder) attrs(anns []*annotations.Attr, in types.Type) []*Attr {
	var out []*Attr
	for _, a := range anns {
		at := &Attr{Ann: a, Type: a.Type}
		if a.From != "" && in != nil && validType(in) {
			b.resolveFrom(at, in)
		}
		out = append(out, at)
	}
	return out
}

// resolveFrom resolves an attribute's from= against the input type in,
// segment by segment, as encoding/json encodes the input: it sets the
// attribute's JSONPath, Type and FieldType, or its Problem at the segment
// that fails.
func (b *builder) resolveFrom(at *Attr, in types.Type) {
	a := at.Ann
	off := 0 // of the segment in from=
	fail := func(format string, args ...any) {
		at.Problem = fmt.Sprintf(format, args...)
		at.ProblemPos = a.ValuePos("from") + token.Pos(off)
	}
	var (
		keys []string
		// level is the type of the JSON object the path is in, and index
		// the fields from it to where the path is: an embedded struct
		// whose fields encoding/json promotes into level's object adds a
		// field to index, not a key.
		level types.Type
		index []int
		cur   = in
		what  = "the input (" + b.describe(in) + ")"
	)
	for seg := range strings.SplitSeq(a.From, ".") {
		t := deref(cur)
		if marshaler(t) {
			fail("from=%s: %s encodes itself (MarshalJSON or MarshalText), so its JSON has no field %s to take", a.From, what, seg)
			return
		}
		st, ok := t.Underlying().(*types.Struct)
		if !ok {
			fail("from=%s: %s is not a struct, so it has no field %s; from names a field of the input's structs", a.From, what, seg)
			return
		}
		if level == nil {
			level = t
		}
		obj, idx, _ := types.LookupFieldOrMethod(t, true, b.pkg, seg)
		switch obj := obj.(type) {
		case nil:
			if idx != nil {
				fail("from=%s: %s has several fields %s at the same depth, through different embedded structs; name the one you mean through its embedded struct (Embedded.%s)", a.From, what, seg, seg)
				return
			}
			msg := fmt.Sprintf("from=%s: %s has no field %s", a.From, what, seg)
			if s := annotations.Suggest(seg, exportedFields(st)); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			}
			fail("%s", msg)
			return
		case *types.Func:
			fail("from=%s: %s is a method of %s, not a field, and from names a field of the input; to record what the method returns, drop from= and set the attribute in the workflow with %s",
				a.From, seg, what, attrSetter(a.Name))
			return
		case *types.Var:
			if !obj.Exported() {
				fail("from=%s: field %s of %s is unexported, so encoding/json leaves it out of the input; export it, or drop from= and set the attribute in the workflow with %s",
					a.From, seg, what, attrSetter(a.Name))
				return
			}
		}
		// Walk the fields Go's selector goes through: the embedded ones,
		// then the field itself.
		s := st
		for j, k := range idx {
			last := j == len(idx)-1
			f, tag := s.Field(k), reflect.StructTag(s.Tag(k)).Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if tag == "-" {
				fail("from=%s: field %s of %s is tagged json:\"-\", so encoding/json leaves it out of the input; the attribute has nothing to take", a.From, f.Name(), what)
				return
			}
			if !validJSONName(name) {
				name = ""
			}
			index = append(index, k)
			ft := deref(f.Type())
			inner, isStruct := ft.Underlying().(*types.Struct)
			if f.Embedded() && name == "" && isStruct {
				// Promoted into level's object: no key of its own.
				s = inner
				if last {
					cur = f.Type()
					what = fmt.Sprintf("embedded field %s (%s)", f.Name(), b.describe(f.Type()))
				}
				continue
			}
			if name == "" {
				name = f.Name()
			}
			if why := hidden(level, index, name); why != "" {
				fail("from=%s: field %s of %s is not in the input's JSON: %s", a.From, f.Name(), what, why)
				return
			}
			if strings.Contains(name, ".") {
				fail("from=%s: field %s is named %q in the input's JSON, whose '.' would read as a separator of the JSON path the runtime takes the attribute from; give the field a JSON name without '.'", a.From, f.Name(), name)
				return
			}
			keys = append(keys, name)
			level, index = nil, nil
			if last {
				cur = f.Type()
				what = fmt.Sprintf("field %s (%s)", f.Name(), b.describe(f.Type()))
				at.FieldType = b.describe(f.Type())
				if strings.Contains(","+opts+",", ",string,") {
					fail("from=%s: field %s has the json option ,string, so the input's JSON holds its value as quoted text; drop the option, or drop from= and set the attribute in the workflow with %s",
						a.From, f.Name(), attrSetter(a.Name))
					return
				}
				continue
			}
			if !isStruct || marshaler(ft) {
				fail("from=%s: embedded field %s of %s encodes itself, so the fields Go promotes from it are not in the input's JSON", a.From, f.Name(), what)
				return
			}
			level, s = ft, inner
		}
		off += len(seg) + 1
	}
	off = len(a.From) - len(lastSegment(a.From))
	if level != nil {
		// The path ends on an embedded struct whose fields are promoted.
		fail("from=%s names %s, a struct whose fields encoding/json promotes into the object around it; an attribute takes a field of a string, integer, float, bool or time.Time type, or a pointer to one: name one of its fields", a.From, what)
		return
	}
	t, problem := attrTypeOf(cur)
	if problem != "" {
		fail("from=%s names %s, %s; an attribute takes a field of a string, integer, float, bool or time.Time type, or a pointer to one", a.From, what, problem)
		return
	}
	at.Type = t
	at.JSONPath = strings.Join(keys, ".")
}

// lastSegment returns the last segment of a dot path.
func lastSegment(path string) string {
	return path[strings.LastIndexByte(path, '.')+1:]
}

// deref returns t without its pointers, alias resolved.
func deref(t types.Type) types.Type {
	t = types.Unalias(t)
	for {
		p, ok := t.Underlying().(*types.Pointer)
		if !ok {
			return t
		}
		if _, named := t.(*types.Named); named {
			return t // a named pointer type: encoding/json does not see through it either
		}
		t = types.Unalias(p.Elem())
	}
}

// attrTypeOf returns the attribute type of a field's type t (pointers
// seen through): time.Time is a time, a string kind a string, an integer
// or float kind a number, a bool kind a bool. Any other type, and one
// that encodes itself, is a problem, saying what it is.
func attrTypeOf(t types.Type) (storage.AttrType, string) {
	t = deref(t)
	if isNamed(t, "time", "Time") {
		return storage.AttrTime, ""
	}
	if marshaler(t) {
		return "", "whose type encodes itself (MarshalJSON or MarshalText), so its JSON is not known to be a string, number, time or bool"
	}
	if bt, ok := t.Underlying().(*types.Basic); ok {
		switch info := bt.Info(); {
		case info&types.IsString != 0:
			return storage.AttrString, ""
		case info&(types.IsInteger|types.IsFloat) != 0 && bt.Kind() != types.Uintptr:
			return storage.AttrNumber, ""
		case info&types.IsBoolean != 0:
			return storage.AttrBool, ""
		case info&types.IsComplex != 0:
			return "", "a complex number"
		}
	}
	switch t.Underlying().(type) {
	case *types.Struct:
		return "", "a struct"
	case *types.Slice, *types.Array:
		return "", "a list"
	case *types.Map:
		return "", "a map"
	case *types.Interface:
		return "", "an interface"
	}
	return "", "of another kind"
}

// exportedFields returns the names of a struct's exported fields, for
// suggesting the closest to a misspelled one.
func exportedFields(st *types.Struct) []string {
	var out []string
	for f := range st.Fields() {
		if f.Exported() {
			out = append(out, f.Name())
		}
	}
	return out
}

// validJSONName reports whether encoding/json takes a tag's name as the
// field's JSON name (its isValidTag); otherwise it uses the Go name.
func validJSONName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// encodedField is a field encoding/json encodes for a struct: its JSON
// name, the fields from the struct to it (through embedded structs) and
// whether its name comes from a tag.
type encodedField struct {
	name   string
	index  []int
	tagged bool
}

// encodedFields returns the fields encoding/json encodes for root, a
// struct type (named or not), as its typeFields does: breadth first
// through embedded structs, and of the fields with one JSON name the
// shallowest, then the tagged one; a name with no single such field is
// dropped.
func encodedFields(root types.Type) []encodedField {
	type level struct {
		st    *types.Struct
		typ   types.Type
		index []int
	}
	var (
		fields    []encodedField
		next      = []level{{st: root.Underlying().(*types.Struct), typ: root}}
		count     = map[types.Type]int{}
		nextCount = map[types.Type]int{}
		visited   = map[types.Type]bool{}
	)
	for len(next) > 0 {
		current := next
		next = nil
		count, nextCount = nextCount, map[types.Type]int{}
		for _, l := range current {
			if visited[l.typ] {
				continue
			}
			visited[l.typ] = true
			for i := range l.st.NumFields() {
				f := l.st.Field(i)
				if f.Embedded() {
					if _, isStruct := deref(f.Type()).Underlying().(*types.Struct); !f.Exported() && !isStruct {
						continue
					}
				} else if !f.Exported() {
					continue
				}
				tag := reflect.StructTag(l.st.Tag(i)).Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validJSONName(name) {
					name = ""
				}
				index := append(slices.Clone(l.index), i)
				ft := types.Unalias(f.Type())
				if p, ok := ft.(*types.Pointer); ok {
					ft = types.Unalias(p.Elem())
				}
				inner, isStruct := ft.Underlying().(*types.Struct)
				if name != "" || !f.Embedded() || !isStruct {
					ef := encodedField{name: name, index: index, tagged: name != ""}
					if ef.name == "" {
						ef.name = f.Name()
					}
					fields = append(fields, ef)
					if count[l.typ] > 1 {
						// The struct is embedded twice at this depth: its
						// fields conflict with themselves.
						fields = append(fields, ef)
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, level{st: inner, typ: ft, index: index})
				}
			}
		}
	}
	slices.SortStableFunc(fields, func(x, y encodedField) int {
		return cmp.Or(cmp.Compare(x.name, y.name), cmp.Compare(len(x.index), len(y.index)),
			boolCmp(y.tagged, x.tagged), slices.Compare(x.index, y.index))
	})
	var out []encodedField
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		group := fields[i:j]
		if len(group) == 1 || len(group[0].index) != len(group[1].index) || group[0].tagged != group[1].tagged {
			out = append(out, group[0])
		}
		i = j
	}
	return out
}

// hidden says why the field at index of struct type t is not encoded
// under name in t's JSON object (another field takes the name, or
// several do and encoding/json drops it), or returns "" when it is.
func hidden(t types.Type, index []int, name string) string {
	fields := encodedFields(t)
	for _, f := range fields {
		if f.name != name {
			continue
		}
		if slices.Equal(f.index, index) {
			return ""
		}
		return fmt.Sprintf("its JSON name %q is taken by a shallower or tagged field", name)
	}
	return fmt.Sprintf("another field has its JSON name %q at the same depth, and encoding/json encodes neither", name)
}

// attrGoName returns an attribute's name in Go case, for its setter:
// each part between '.', '_' and '-' capitalized, a common initialism
// upper-cased (order.id is OrderID).
func attrGoName(name string) string {
	var b strings.Builder
	for part := range strings.FieldsFuncSeq(name, func(r rune) bool { return r == '.' || r == '_' || r == '-' }) {
		if up := strings.ToUpper(part); initialisms[up] {
			b.WriteString(up)
			continue
		}
		b.WriteString(exported(part))
	}
	return b.String()
}

// initialisms are the words Go writes in upper case (golint's list).
var initialisms = map[string]bool{
	"ACL": true, "API": true, "ASCII": true, "CPU": true, "CSS": true, "DNS": true, "EOF": true, "GUID": true,
	"HTML": true, "HTTP": true, "HTTPS": true, "ID": true, "IP": true, "JSON": true, "LHS": true, "QPS": true,
	"RAM": true, "RHS": true, "RPC": true, "SLA": true, "SMTP": true, "SQL": true, "SSH": true, "TCP": true,
	"TLS": true, "TTL": true, "UDP": true, "UI": true, "UID": true, "UUID": true, "URI": true, "URL": true,
	"UTF8": true, "VM": true, "XML": true, "XMPP": true, "XSRF": true, "XSS": true,
}

// attrSetter names, for messages, the setter of the attribute name on a
// workflow's context.
func attrSetter(name string) string { return "ctx." + attrSetMethod(name) }

// attrKind is what render writes for an attribute of one type.
type attrKind struct {
	// value is the Go type of the setter's value; builder and typeConst
	// name the runtime's builder of such an attribute and the constant
	// of its type; described says what its values are, for doc comments.
	value                         func() *jen.Statement
	builder, typeConst, described string
}

// attrKinds are the attribute types as render writes them.
var attrKinds = map[storage.AttrType]attrKind{
	storage.AttrString: {jen.String, "StringAttr", "AttrString", "a string"},
	storage.AttrNumber: {jen.Float64, "NumberAttr", "AttrNumber", "a number"},
	storage.AttrTime:   {func() *jen.Statement { return jen.Qual("time", "Time") }, "TimeAttr", "AttrTime", "a time"},
	storage.AttrBool:   {jen.Bool, "BoolAttr", "AttrBool", "a bool"},
}

// kind returns what render writes for the attribute's type; a type not
// known yet (check reports why) is written as a string's.
func (a *Attr) kind() attrKind {
	if k, ok := attrKinds[a.Type]; ok {
		return k
	}
	return attrKinds[storage.AttrString]
}

// describeType says what an attribute's values are, for messages and doc
// comments.
func (a *Attr) describeType() string { return a.kind().described }

// typeKnown reports whether the attribute's type is known: from type=,
// or from the field from= names once it resolved.
func (a *Attr) typeKnown() bool {
	return a.Type != "" && (a.Ann.From == "" || a.JSONPath != "")
}

// checkAttrs reports the search attributes of the package's workflows
// that cannot be: a from= that names no field they can be taken from, a
// type= that disagrees with its field, a name declared twice on one
// workflow or of two types in the package, two whose setters would share
// a name, and more than storage.MaxAttributes on one workflow.
func checkAttrs(m *Package, d *diagnostics) {
	type first struct {
		attr *Attr
		w    *Workflow
	}
	typed := map[string]first{}
	for _, w := range slices.SortedFunc(slices.Values(m.Workflows), func(x, y *Workflow) int { return cmp.Compare(x.Pos, y.Pos) }) {
		names := map[string]*Attr{}
		setters := map[string]*Attr{}
		for i, a := range w.Attrs {
			if i == storage.MaxAttributes {
				d.add(a.Ann.Pos(), "workflow %s declares %d search attributes, over the limit of %d a run holds", w.GoName, len(w.Attrs), storage.MaxAttributes)
			}
			if a.Problem != "" {
				d.add(a.ProblemPos, "%s", a.Problem)
			}
			if a.Ann.Type != "" && a.JSONPath != "" && a.Ann.Type != a.Type {
				d.add(a.Ann.ValuePos("type"), "attribute %s has type=%s, but from=%s is %s (%s): drop type=, which the field gives, or take the attribute from a field of type %s",
					a.Ann.Name, a.Ann.Type, a.Ann.From, a.describeType(), a.FieldType, a.Ann.Type)
			}
			if a.Ann.Name == "" {
				continue // reported by the parser
			}
			if f, ok := names[a.Ann.Name]; ok {
				d.add(a.Ann.ValuePos("name"), "attribute %s is declared twice on workflow %s (first at line %d)", a.Ann.Name, w.GoName, d.fset.Position(f.Ann.Pos()).Line)
				continue
			}
			names[a.Ann.Name] = a
			method := attrSetMethod(a.Ann.Name)
			if f, ok := setters[method]; ok {
				d.add(a.Ann.ValuePos("name"), "attributes %s (line %d) and %s of workflow %s would both get the setter %s; rename one of them",
					f.Ann.Name, d.fset.Position(f.Ann.Pos()).Line, a.Ann.Name, w.GoName, method)
			}
			setters[method] = a
			if !a.typeKnown() {
				continue // check reports why
			}
			if f, ok := typed[a.Ann.Name]; ok && f.attr.Type != a.Type {
				d.add(attrTypePos(a), "attribute %s is %s here but %s on workflow %s (line %d): a name has one type across the package, as listings filter the runs of every workflow on it; give one of them another name",
					a.Ann.Name, a.describeType(), f.attr.describeType(), f.w.GoName, d.fset.Position(f.attr.Ann.Pos()).Line)
				continue
			}
			if _, ok := typed[a.Ann.Name]; !ok {
				typed[a.Ann.Name] = first{a, w}
			}
		}
	}
}

// attrTypePos is where an attribute's type is written: at type=, else at
// from=, whose field gives it.
func attrTypePos(a *Attr) token.Pos {
	if a.Ann.Type != "" {
		return a.Ann.ValuePos("type")
	}
	return a.Ann.ValuePos("from")
}

// attrSetters writes the typed setter of each of workflow w's search
// attributes on its context.
func (r *renderer) attrSetters(w *Workflow) {
	ctx := w.contextType()
	for _, a := range w.Attrs {
		from := ""
		if a.Ann.From != "" {
			from = fmt.Sprintf(" Each run's start sets it from the input's field %s (from=%s, %s in the input's JSON); this sets it over that.",
				a.Ann.From, a.Ann.From, a.JSONPath)
		}
		r.f.Line()
		r.doc(fmt.Sprintf("%s sets the run's search attribute %s, %s, to v: durably, with a checkpoint of the run, so a "+
			"replay does not set it again, and from then on listings that filter on %s (runtime.ListRunsQuery.Where, "+
			"stem runs --where) see v. Setting it again replaces the value.%s",
			a.setMethod(), a.Ann.Name, a.describeType(), a.Ann.Name, from), "")
		r.f.Func().Params(jen.Id("c").Op("*").Id(ctx)).Id(a.setMethod()).Params(jen.Id("v").Add(a.kind().value())).Error().Block(
			jen.Return(rt("SetAttributes").Call(jen.Id("c").Dot(embeddedField), rt(a.kind().builder).Call(jen.Lit(a.Ann.Name), jen.Id("v")))))
	}
}

// attrDecls returns the option of Register that declares workflow w's
// search attributes, one per line, or nil when it has none.
func (r *renderer) attrDecls(w *Workflow) jen.Code {
	if len(w.Attrs) == 0 {
		return nil
	}
	var decls []jen.Code
	for _, a := range w.Attrs {
		fields := []jen.Code{jen.Id("Name").Op(":").Lit(a.Ann.Name), jen.Id("Type").Op(":").Add(rt(a.kind().typeConst))}
		if a.JSONPath != "" {
			fields = append(fields, jen.Id("From").Op(":").Lit(a.JSONPath))
		}
		decls = append(decls, rt("AttrDecl").Values(fields...))
	}
	return rt("WorkflowAttributes").Custom(jen.Options{Open: "(", Close: ")", Separator: ",", Multi: true}, decls...)
}

// setterDoc says, for the doc comment of workflow w's context, which
// setters its search attributes get.
func setterDoc(w *Workflow) string {
	if len(w.Attrs) == 0 {
		return ""
	}
	var names []string
	for _, a := range w.Attrs {
		names = append(names, a.setMethod())
	}
	return fmt.Sprintf(" It sets the run's search attributes with %s.", strings.Join(names, ", "))
}

// standInAttrs says, for the doc comment of workflow w's mock, that a
// stand-in is registered with the workflow's search attributes.
func standInAttrs(w *Workflow) string {
	if len(w.Attrs) == 0 {
		return ""
	}
	return " with its search attributes"
}

// attrsDoc says, for Register's doc comment, which search attributes
// workflow w declares.
func attrsDoc(w *Workflow) string {
	if len(w.Attrs) == 0 {
		return ""
	}
	var parts []string
	for _, a := range w.Attrs {
		p := fmt.Sprintf("%s (%s", a.Ann.Name, a.describeType())
		if a.JSONPath != "" {
			p += ", from the input's " + a.Ann.From
		}
		parts = append(parts, p+")")
	}
	return fmt.Sprintf(" It declares the workflow's search attributes, %s, which the engine records in the catalog "+
		"so listings filter its runs on them in their types; a run's start takes those with from= from its input.",
		strings.Join(parts, ", "))
}
