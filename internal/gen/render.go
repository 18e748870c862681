package gen

import (
	"bytes"
	"fmt"
	"go/format"
	"go/token"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/stemflow/stem/annotations"
)

// fixedImports are the packages generated code itself uses, which get
// their own names first.
var fixedImports = []struct{ path, name string }{
	{runtimePath, "runtime"},
	{"context", "context"},
	{"fmt", "fmt"},
	{"reflect", "reflect"},
	{"time", "time"},
	{"iter", "iter"},
}

// renderer writes one package's stem_gen.go from its model.
type renderer struct {
	m *Package
	f *jen.File
	// reserved are identifiers a parameter name must not shadow.
	reserved map[string]bool
	// typeNames maps the package's own types that a local of generated
	// code would hide (a payload type named in, say) to the alias the
	// generated file declares for each (see typeAliases); funcNames does
	// the same for annotated functions (a step function named c).
	typeNames, funcNames map[string]string
}

// render returns the package's generated file, gofmt'd.
func render(m *Package) ([]byte, error) {
	r := &renderer{m: m, f: jen.NewFilePathName(m.Path, m.Name), reserved: map[string]bool{}, typeNames: map[string]string{}, funcNames: map[string]string{}}
	r.f.HeaderComment(header)
	r.imports()
	r.guards()
	r.typeAliases()
	r.calls()
	for _, s := range m.Steps {
		r.step(s)
	}
	if m.hasCalls() {
		for _, e := range m.Events {
			r.await(e)
		}
		for _, u := range m.Updates {
			r.takeUpdate(u)
		}
		for _, s := range m.Streams {
			r.writeStream(s)
		}
		for _, w := range m.Workflows {
			if w.isNewest() {
				r.children(w)
			}
		}
	}
	for _, w := range m.Workflows {
		r.workflow(w)
	}
	for _, e := range m.Events {
		r.event(e)
	}
	for _, u := range m.Updates {
		r.update(u)
	}
	for _, s := range m.Streams {
		r.stream(s)
	}
	r.registerEvents()
	r.registerUpdates()
	r.txSteps()
	r.registerAll()
	r.declaredErrors()
	var buf bytes.Buffer
	if err := r.f.Render(&buf); err != nil {
		return nil, err
	}
	return groupImports(buf.Bytes())
}

// groupImports puts the standard library's imports first, then the
// others after a blank line, as goimports does (jennifer sorts them all as
// one group).
func groupImports(src []byte) ([]byte, error) {
	start := bytes.Index(src, []byte("\nimport (\n"))
	if start < 0 {
		return src, nil
	}
	start += len("\nimport (\n")
	end := bytes.Index(src[start:], []byte("\n)\n"))
	if end < 0 {
		return src, nil
	}
	end += start
	var std, other []string
	for line := range strings.SplitSeq(string(src[start:end]), "\n") {
		path := line[strings.IndexByte(line, '"')+1:]
		if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
			other = append(other, line)
		} else {
			std = append(std, line)
		}
	}
	block := strings.Join(std, "\n")
	if len(std) > 0 && len(other) > 0 {
		block += "\n\n"
	}
	block += strings.Join(other, "\n")
	out := slices.Concat(src[:start], []byte(block), src[end:])
	return format.Source(out)
}

// importAll imports the packages of names (path to name): first those of
// order, in order, then the rest by path, each under its name unless taken
// (or a keyword), else name1, name2, ...; every alias is marked taken and
// reserved.
func (r *renderer) importAll(order []string, names map[string]string, taken map[string]bool) {
	var rest []string
	for path := range names {
		if !slices.Contains(order, path) {
			rest = append(rest, path)
		}
	}
	slices.Sort(rest)
	for _, path := range append(order, rest...) {
		name := names[path]
		alias := name
		for i := 1; taken[alias] || token.IsKeyword(alias); i++ {
			alias = name + strconv.Itoa(i)
		}
		taken[alias] = true
		r.reserved[alias] = true
		if alias == name {
			r.f.ImportName(path, name)
		} else {
			r.f.ImportAlias(path, alias)
		}
	}
}

// imports names every imported package: its own name unless that is taken
// by an identifier of the package, a generated one, a local of generated
// code or another import; then name1, name2, ...
func (r *renderer) imports() {
	taken := map[string]bool{}
	for n := range locals {
		taken[n] = true
	}
	for n := range r.m.Declared {
		taken[n] = true
	}
	for n := range r.m.generatedNames() {
		taken[n] = true
	}
	for _, n := range []string{"error", "string", "int", "any", "nil", "true", "false", "make", "len"} {
		taken[n] = true
	}
	names := map[string]string{}
	add := func(path, name string) {
		if path != r.m.Path {
			if _, ok := names[path]; !ok {
				names[path] = name
			}
		}
	}
	r.m.eachType(func(t *Type) { t.Paths(add) })
	var order []string
	for _, fi := range fixedImports {
		order = append(order, fi.path)
		names[fi.path] = fi.name
	}
	r.importAll(order, names, taken)
	// A step method's body uses c, sc, fn, ok, the imports, the package's own
	// identifiers and generated ones; its parameters must not shadow them.
	for n := range r.m.Declared {
		r.reserved[n] = true
	}
	for n := range r.m.generatedNames() {
		r.reserved[n] = true
	}
	r.reserved["c"], r.reserved["sc"] = true, true
	r.reserved[overrideLocal], r.reserved["ok"] = true, true
	r.reserved[txLocal] = true
	r.hiddenTypes(taken)
}

// hiddenTypes names an alias for each of the package's own types that
// generated code mentions and that has the name of one of its locals
// (locals): written under its own name, a function declaring that local
// would mean the local, not the type. The aliases are named
// stemType<Name>, or with a number after when that is taken.
func (r *renderer) hiddenTypes(taken map[string]bool) {
	var hidden []string
	add := func(name string) {
		// The shape guards rename their own local apart from the
		// package's names.
		if locals[name] && name != guardAliasName && !slices.Contains(hidden, name) {
			hidden = append(hidden, name)
		}
	}
	var walk func(t *Type)
	walk = func(t *Type) {
		if t == nil {
			return
		}
		if t.Kind == KindNamed && t.Path == r.m.Path {
			add(t.Name)
		}
		for _, a := range t.Args {
			walk(a)
		}
		walk(t.Key)
		walk(t.Elem)
		for _, f := range t.Fields {
			walk(f.Type)
		}
	}
	r.m.eachType(walk)
	if r.m.Receiver != nil {
		add(r.m.Receiver.Name)
	}
	for _, s := range r.m.Steps {
		if s.Recv != nil {
			add(s.Recv.TypeName)
		}
	}
	var funcs []string
	for _, w := range r.m.Workflows {
		if locals[w.GoName] {
			funcs = append(funcs, w.GoName)
		}
	}
	for _, s := range r.m.Steps {
		if s.Recv == nil && locals[s.GoName] {
			funcs = append(funcs, s.GoName)
		}
	}
	for _, u := range r.m.Updates {
		if u.Validate != nil && locals[u.Validate.Name] {
			funcs = append(funcs, u.Validate.Name)
		}
	}
	name := func(prefix, name string) string {
		base := prefix + exported(name)
		alias := base
		for i := 1; taken[alias] || r.m.Declared[alias].IsValid(); i++ {
			alias = base + strconv.Itoa(i)
		}
		taken[alias] = true
		r.reserved[alias] = true
		return alias
	}
	slices.Sort(hidden)
	for _, n := range hidden {
		r.typeNames[n] = name("stemType", n)
	}
	slices.Sort(funcs)
	for _, n := range slices.Compact(funcs) {
		r.funcNames[n] = name("stemFunc", n)
	}
}

// typeAliases declares the aliases hiddenTypes named.
func (r *renderer) typeAliases() {
	for _, name := range slices.Sorted(maps.Keys(r.typeNames)) {
		r.f.Line()
		r.doc(fmt.Sprintf("%s is %s, under a name that no local of this file's functions hides: the file writes the type by this name.", r.typeNames[name], name), "")
		r.f.Type().Id(r.typeNames[name]).Op("=").Id(name)
	}
	for _, name := range slices.Sorted(maps.Keys(r.funcNames)) {
		r.f.Line()
		r.doc(fmt.Sprintf("%s is %s, under a name that no local of this file's functions hides: the file calls the function by this name.", r.funcNames[name], name), "")
		r.f.Var().Id(r.funcNames[name]).Op("=").Id(name)
	}
}

// ownFunc writes the name of an annotated function of the package, as
// the variable typeAliases declares when a local of generated code would
// hide it.
func (r *renderer) ownFunc(name string) *jen.Statement {
	if alias, ok := r.funcNames[name]; ok {
		return jen.Id(alias)
	}
	return jen.Id(name)
}

// ownType writes the package's own type name, as an alias when a local
// of generated code would hide it.
func (r *renderer) ownType(name string) *jen.Statement {
	if alias, ok := r.typeNames[name]; ok {
		return jen.Id(alias)
	}
	return jen.Id(name)
}

// eachType calls fn for every type the generated file mentions.
func (m *Package) eachType(fn func(*Type)) {
	params := func(ps []*Param) {
		for _, p := range ps {
			if p.Type != nil {
				fn(p.Type)
			}
		}
	}
	for _, w := range m.Workflows {
		params(w.Params)
		params(w.Results)
	}
	for _, s := range m.Steps {
		params(s.Params)
		params(s.Results)
	}
	for _, e := range m.Events {
		fn(e.Type)
	}
	for _, u := range m.Updates {
		fn(u.Type)
		if u.Reply != nil {
			fn(u.Reply.Type)
		}
	}
	for _, s := range m.Streams {
		fn(s.Type)
	}
	for _, w := range m.Workflows {
		if w.Progress != nil && w.Progress.Type != nil {
			fn(w.Progress.Type)
		}
	}
	for _, g := range m.Guards {
		if g.Skip == "" {
			fn(g.Type)
			fn(g.Underlying)
		}
	}
}

// doc writes a doc comment: our text, wrapped, then the user's doc comment
// (with any Deprecated: paragraph) as they wrote it.
func (r *renderer) doc(ours, user string) {
	for _, line := range wrap(ours, 76) {
		r.f.Comment("// " + line)
	}
	if user = strings.TrimSpace(user); user != "" {
		r.f.Comment("//")
		for line := range strings.SplitSeq(user, "\n") {
			if line == "" {
				r.f.Comment("//")
			} else {
				r.f.Comment("// " + line)
			}
		}
	}
}

// wrap breaks text into lines of at most width bytes where it can.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for w := range strings.FieldsSeq(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// typ writes a type.
func (r *renderer) typ(t *Type) *jen.Statement {
	switch t.Kind {
	case KindNamed:
		s := jen.Id(t.Name)
		if alias, ok := r.typeNames[t.Name]; ok && t.Path == r.m.Path {
			s = jen.Id(alias)
		} else if t.Path != "" {
			s = jen.Qual(t.Path, t.Name)
		}
		if len(t.Args) > 0 {
			args := make([]jen.Code, len(t.Args))
			for i, a := range t.Args {
				args[i] = r.typ(a)
			}
			s = s.Types(args...)
		}
		return s
	case KindBasic:
		return jen.Id(t.Name)
	case KindPointer:
		return jen.Op("*").Add(r.typ(t.Elem))
	case KindSlice:
		return jen.Index().Add(r.typ(t.Elem))
	case KindArray:
		return jen.Index(jen.Lit(int(t.Len))).Add(r.typ(t.Elem))
	case KindMap:
		return jen.Map(r.typ(t.Key)).Add(r.typ(t.Elem))
	case KindStruct:
		return jen.StructFunc(func(g *jen.Group) {
			for _, f := range t.Fields {
				var s *jen.Statement
				if f.Embedded {
					s = g.Add(r.typ(f.Type))
				} else {
					s = g.Id(f.Name).Add(r.typ(f.Type))
				}
				if f.Tag != "" && !strings.Contains(f.Tag, "`") {
					s.Op("`" + f.Tag + "`")
				} else if f.Tag != "" {
					s.Op(strconv.Quote(f.Tag))
				}
			}
		})
	}
	return jen.Id(t.Name)
}

func rt(name string) *jen.Statement { return jen.Qual(runtimePath, name) }

// apiVersion is the version of the generated API this generator writes:
// the file refers to runtime.SupportPackageIsVersion<apiVersion>, so it
// compiles only against a runtime that supports it. Version 3: child calls
// take runtime.ChildOptions and Start<W>Child returns a *runtime.ChildRun;
// Register<W> passes the workflow's version and registers the package's
// event types. Version 4: futures, typed ContinueAsNew, progress and
// workflow timeouts.
//
// A new runtime function that generated code calls only for a new
// annotation key (runtime.WorkflowQueue for queue=, WorkflowRetention for
// retention=) needs no new version: a file that uses it already stops
// compiling against a runtime without it, naming the function, and a file
// that does not is unchanged and still builds against older runtimes of
// this version. A bump is for a change that would otherwise compile and
// misbehave, or that every generated file must pick up. (The Tx forms and
// Send<Event>OrStart<Workflow>, which every file with workflows or events
// now has, need runtime.StartTx, SendOrStart and Engine.SendEventTx and
// EmitTx: against a runtime without them such a file stops compiling,
// naming the function; nothing misbehaves, so they bumped nothing.)
const apiVersion = 4

// guards writes the compile-time checks: the runtime version, and the
// signature of every annotated function.
func (r *renderer) guards() {
	m := r.m
	r.f.Comment("// This file is written for version " + strconv.Itoa(apiVersion) + " of the generated API: with a runtime")
	r.f.Comment("// that does not support it, it stops compiling here. Run go generate: stemgen")
	r.f.Comment("// comes with the runtime's module, so the two then agree.")
	r.f.Const().Id("_").Op("=").Add(rt(fmt.Sprintf("SupportPackageIsVersion%d", apiVersion)))
	validators := m.validators()
	if len(m.Workflows) == 0 && len(m.Steps) == 0 && len(validators) == 0 {
		r.shapeGuards()
		return
	}
	r.f.Line()
	r.f.Comment("// These assignments stop compiling when an annotated function's signature no")
	r.f.Comment("// longer matches this file: run go generate.")
	r.f.Var().DefsFunc(func(g *jen.Group) {
		for _, w := range m.Workflows {
			g.Id("_").Func().Params(jen.Op("*").Id(w.contextType()), r.typ(w.Input().Type)).
				Params(r.typ(w.Output().Type), jen.Error()).Op("=").Id(w.GoName)
		}
		for _, s := range m.Steps {
			var params []jen.Code
			fn := jen.Id(s.GoName)
			if s.Recv != nil {
				params = append(params, jen.Op("*").Add(r.ownType(s.Recv.TypeName)))
				fn = jen.Parens(jen.Op("*").Add(r.ownType(s.Recv.TypeName))).Dot(s.GoName)
			}
			for _, p := range s.Params {
				params = append(params, r.typ(p.Type))
			}
			var results []jen.Code
			for _, p := range s.Results {
				results = append(results, r.typ(p.Type))
			}
			g.Id("_").Func().Params(params...).Params(results...).Op("=").Add(fn)
		}
		for _, u := range validators {
			g.Id("_").Func().Params(r.typ(u.Type)).Error().Op("=").Add(r.ownFunc(u.Validate.Name))
		}
	})
	r.shapeGuards()
}

// validators returns the updates whose validate= names a function the
// generated file calls: the function a guard holds to its signature.
func (m *Package) validators() []*Update {
	var out []*Update
	for _, u := range m.Updates {
		if u.Validate != nil {
			out = append(out, u)
		}
	}
	return out
}

// shapeGuards writes, for every named type that is part of a durable
// payload, a function that stops compiling when the type's fields, their
// types or tags change: it declares the type's underlying type as it was
// at generation and assigns a value of the type to it (or, for a
// predeclared underlying type, converts a pointer). The compiler then
// points at that line, which says what to do.
func (r *renderer) shapeGuards() {
	if len(r.m.Guards) == 0 {
		return
	}
	r.f.Line()
	r.f.Comment("// The functions below stop compiling when a type that is part of a durable")
	r.f.Comment("// payload no longer has the fields, field types and tags it had when this file")
	r.f.Comment("// was generated. Run go generate: it judges the change against the manifest,")
	r.f.Comment("// for the runs in flight that hold payloads of the old shape.")
	alias := r.guardAlias()
	for _, g := range r.m.Guards {
		r.f.Line()
		if g.Skip != "" {
			r.doc(fmt.Sprintf("%s is part of a durable payload, but has no guard here: %s. go generate still judges its shape.", g.Name, g.Skip), "")
			continue
		}
		r.doc(fmt.Sprintf("%s is part of a durable payload; %s is its underlying type as of go generate.", g.Name, alias), "")
		note := fmt.Sprintf("stem: %s changed shape since go generate; run go generate", g.Name)
		decl := jen.Type().Id(alias).Op("=")
		var use *jen.Statement
		switch {
		case g.Basic:
			decl.Op("*").Add(r.typ(g.Underlying))
			use = jen.Id("_").Op("=").Id(alias).Call(jen.Parens(jen.Op("*").Add(r.typ(g.Type))).Call(jen.Nil()))
		case g.Composite:
			decl.Add(r.typ(g.Underlying))
			use = jen.Var().Id("_").Id(alias).Op("=").Add(r.typ(g.Type)).Values()
		default:
			decl.Add(r.typ(g.Underlying))
			use = jen.Var().Id("_").Id(alias).Op("=").Add(r.typ(g.Type)).Call(jen.Nil())
		}
		r.f.Func().Id("_").Params().Block(decl, use.Comment(note))
	}
}

// guardAlias returns the name of the type alias each shape guard
// declares: guardAliasName, unless the package declares that name, which
// a guard's type may mention.
func (r *renderer) guardAlias() string {
	name := guardAliasName
	for r.m.Declared[name].IsValid() || r.reserved[name] {
		name += "_"
	}
	return name
}

// drainDoc says, for an older version of a workflow, why it exists; for
// the newest, it says nothing.
func (r *renderer) drainDoc(w *Workflow) string {
	if w.isNewest() {
		return ""
	}
	return fmt.Sprintf(" %s is version %d of %s, older than %s (version %d): it exists to drain the runs "+
		"started under version %d, while new runs start on the newest version an engine registers.",
		w.GoName, w.Ann.Version, w.Ann.Name, w.Newest.GoName, w.Newest.Ann.Version, w.Ann.Version)
}

// olderList names the older versions of workflow w, the newest, or
// returns "" when it has none.
func (r *renderer) olderList(w *Workflow) string {
	var list []string
	for _, v := range r.m.versions(w)[1:] {
		list = append(list, fmt.Sprintf("%s (version %d)", v.GoName, v.Ann.Version))
	}
	return strings.Join(list, ", ")
}

// workflow writes everything generated for one workflow: for every
// version its context, version constant and Register function; for the
// newest version of a name the client API too.
func (r *renderer) workflow(w *Workflow) {
	m, f := r.m, r.f
	ctx := w.contextType()
	in := r.typ(w.Input().Type)
	durable := w.Ann.Name
	older := ""
	if w.isNewest() {
		older = r.olderList(w)
		f.Line()
		what := fmt.Sprintf("%s is the durable name of workflow %s, stored with every run.", w.nameConst(), w.GoName)
		if older != "" {
			what = fmt.Sprintf("%s is the durable name of workflow %s, stored with every run, and of its older "+
				"versions %s, registered beside it to drain the runs started under them.", w.nameConst(), w.GoName, older)
		}
		r.doc(what, w.Doc)
		f.Const().Id(w.nameConst()).Op("=").Lit(durable)
	}

	f.Line()
	versionDoc := fmt.Sprintf("%s is the version= of workflow %s (%s). Every run records the "+
		"version it started under, and an engine claims a run only when it registers that version.",
		w.versionConst(), w.GoName, durable)
	if older != "" {
		versionDoc += " New runs start on this version, the newest the package registers."
	}
	r.doc(versionDoc+r.drainDoc(w), w.Doc)
	f.Const().Id(w.versionConst()).Op("=").Lit(w.Ann.Version)

	each := "each"
	if m.hasTxSteps() {
		each = "each but a transactional step"
	}
	f.Line()
	r.doc(fmt.Sprintf("%s is what workflow %s (%s) receives: the runtime's *runtime.WorkflowContext, "+
		"with a typed method for every step, event and child workflow of package %s, %s also in a form "+
		"that returns a future (%s and %s wait for several), and ContinueAsNew typed "+
		"by the workflow's input.%s%s%s", ctx, w.GoName, durable, m.Name, each, allMethod, selectMethod, m.interactDoc(), setterDoc(w), r.drainDoc(w)), w.Doc)
	f.Type().Id(ctx).StructFunc(func(g *jen.Group) {
		g.Op("*").Add(rt("WorkflowContext"))
		if m.hasCalls() {
			g.Id(callsType)
		}
	})

	f.Line()
	r.doc(fmt.Sprintf("%s ends this execution of the run and begins the next, of the same run, with "+
		"input in and an empty history, so a workflow that loops forever replays only its latest "+
		"iteration. Call it as a return, with any output (it is not the run's): return out, ctx.%s(next). "+
		"It waits for the run's step futures to end, keeps the run's ID, parent, deadline, progress and "+
		"the events sent to it, and does not return when it succeeds; an input that does not encode is "+
		"an error and nothing changes.", continueAsNewMethod, continueAsNewMethod), "")
	f.Func().Params(jen.Id("c").Op("*").Id(ctx)).Id(continueAsNewMethod).Params(jen.Id("in").Add(in.Clone())).Error().Block(
		jen.Return(rt("ContinueAsNew").Call(jen.Id("c").Dot(embeddedField), jen.Id("in"))))

	r.fanIn(ctx)
	r.detached(ctx)

	if prog := w.Progress; prog != nil {
		readers := fmt.Sprintf("Progress and WaitProgress on %s", w.runType())
		if !w.isNewest() {
			readers = "runtime.GetProgress and runtime.WaitProgress"
		}
		f.Line()
		r.doc(fmt.Sprintf("%s publishes p as the run's progress, which callers read with %s. "+
			"It is written with the run's next write "+
			"(a step's checkpoint, a suspension, its end) or soon while a step runs; publishing the value "+
			"last published writes nothing, so a replay costs no write.", setProgressMethod, readers), "")
		f.Func().Params(jen.Id("c").Op("*").Id(ctx)).Id(setProgressMethod).Params(jen.Id("p").Add(r.typ(prog.Type))).Error().Block(
			jen.Return(rt("SetProgress").Call(jen.Id("c").Dot(embeddedField), jen.Id("p"))))
	}

	r.attrSetters(w)

	if w.isNewest() {
		r.runType(w)
	}
	r.register(w)
	if w.isNewest() {
		r.client(w)
	}
}

// runType writes the typed handle on a run of workflow w, with its
// progress methods.
func (r *renderer) runType(w *Workflow) {
	f := r.f
	ctx, run, prog, durable := w.contextType(), w.runType(), w.Progress, w.Ann.Name
	out := r.typ(w.Output().Type)
	f.Line()
	runDoc := fmt.Sprintf("%s is a typed handle on a run of workflow %s (%s): ID, Status, Result, Pause, "+
		"Resume, Terminate, Restart, and IdempotencyKey for reconciling with the services its steps called.",
		run, w.GoName, durable)
	if prog != nil {
		runDoc = fmt.Sprintf("%s is a typed handle on a run of workflow %s (%s): ID, Status, Result, Pause, "+
			"Resume, Terminate, Restart, IdempotencyKey for reconciling with the services its steps called, and "+
			"the run's published progress, %s.", run, w.GoName, durable, prog.Name)
	}
	r.doc(runDoc, w.Doc)
	f.Type().Id(run).StructFunc(func(g *jen.Group) {
		g.Op("*").Add(rt("Run")).Types(out.Clone())
		if prog != nil {
			g.Id(runEngineField).Op("*").Add(rt("Engine"))
		}
	})
	if prog != nil {
		pt := func() *jen.Statement { return r.typ(prog.Type) }
		f.Line()
		r.doc(fmt.Sprintf("%s returns the progress the run last published (%s.%s), and whether it has "+
			"published any.", progressMethod, ctx, setProgressMethod), "")
		f.Func().Params(jen.Id("r").Op("*").Id(run)).Id(progressMethod).Params(jen.Id("ctx").Qual("context", "Context")).
			Params(pt(), jen.Bool(), jen.Error()).Block(
			jen.Return(rt("GetProgress").Types(pt()).Call(jen.Id("ctx"), jen.Id("r").Dot(runEngineField), jen.Id("r").Dot("ID").Call())))
		f.Line()
		r.doc(fmt.Sprintf("%s waits until the run's published progress differs from after and returns it; "+
			"or, when the run finishes first, the progress it published last. Pass the zero value to wait "+
			"for the first.", waitProgressMethod), "")
		f.Func().Params(jen.Id("r").Op("*").Id(run)).Id(waitProgressMethod).
			Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("after").Add(pt())).
			Params(pt(), jen.Error()).Block(
			jen.Return(rt("WaitProgress").Call(jen.Id("ctx"), jen.Id("r").Dot(runEngineField), jen.Id("r").Dot("ID").Call(), jen.Id("after"))))
	}
}

// register writes the function registering workflow w, at its version.
func (r *renderer) register(w *Workflow) {
	m, f := r.m, r.f
	ctx, durable := w.contextType(), w.Ann.Name
	in, out := r.typ(w.Input().Type), r.typ(w.Output().Type)
	f.Line()
	regParams := []jen.Code{jen.Id("e").Op("*").Add(rt("Engine"))}
	regDoc := fmt.Sprintf("%s registers workflow %s with e under its durable name, %s, at version %d; "+
		"the engine records them in the store's catalog with the shapes of its input and output, for "+
		"tools that start runs without its Go types.", w.registerFunc(), w.GoName, durable, w.Ann.Version)
	if older := r.olderList(w); w.isNewest() && older != "" {
		regDoc += fmt.Sprintf(" New runs start on this version, the newest; register its older versions %s "+
			"beside it (%s registers all) while runs started under them remain.", older, registerAllFunc)
	}
	regDoc += r.drainDoc(w)
	if w.Ann.Timeout > 0 {
		regDoc += fmt.Sprintf(" Its runs get a deadline %s after their start (timeout=), unless the start sets "+
			"one with runtime.WithTimeout or runtime.WithDeadline; past it a run ends with an error matching "+
			"runtime.ErrDeadline.", w.Ann.Timeout)
	}
	if w.Ann.Queue != "" {
		regDoc += fmt.Sprintf(" Its runs are started on queue %s (queue=) unless the start names another; "+
			"the engine must have that queue registered.", w.Ann.Queue)
	}
	switch {
	case w.Ann.RetainForever:
		regDoc += " Its finished runs are kept forever (retention=forever), whatever the engine's default retention."
	case w.Ann.Retention > 0:
		regDoc += fmt.Sprintf(" Its finished runs are kept for %s after they end (retention=), whatever the "+
			"engine's default retention.", w.Ann.Retention)
	}
	if m.registersEvents() {
		// The list of events is written once, on registerEventsFunc: the
		// file grows with workflows plus events, not their product.
		regDoc += fmt.Sprintf(" It also registers the event types of package %s, so such tools can "+
			"check an event's payload.", m.Name)
	}
	if m.registersUpdates() {
		regDoc += fmt.Sprintf(" It also registers the updates of package %s, so the engine checks a request "+
			"(with the update's validator) before it sends it, and such tools check one too.", m.Name)
	}
	if existing, ended := policyClauses(w); existing != "" || ended != "" {
		regDoc += " " + startPolicyDoc(existing, ended, "runtime.IfExists and runtime.IfEnded in a start override them.")
	}
	regDoc += attrsDoc(w)
	if m.declaresTxSteps() {
		regDoc += fmt.Sprintf(" Package %s has transactional steps, which run only on a store with transactions of "+
			"their type (pgstore for pgx.Tx, sqlitestore for *sql.Tx): on another, such as Redis or the in-memory "+
			"store, it fails with an error matching runtime.ErrInvalidArgument that names the step, its "+
			"transaction type and the store.", m.Name)
	}
	if m.Receiver != nil {
		regParams = append(regParams, jen.Id("steps").Op("*").Add(r.ownType(m.Receiver.Name)))
		regDoc += " Its steps run on steps, which must not be nil."
	}
	r.doc(regDoc, w.Doc)
	f.Func().Id(w.registerFunc()).Params(regParams...).Error().BlockFunc(func(g *jen.Group) {
		lit := jen.Dict{jen.Id(embeddedField): jen.Id("c")}
		if m.Receiver != nil {
			g.If(jen.Id("steps").Op("==").Nil()).Block(
				jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: "+w.registerFunc()+": steps is nil"), rt("ErrInvalidArgument"))))
		}
		if m.registersEvents() {
			g.If(jen.Err().Op(":=").Id(registerEventsFunc).Call(jen.Id("e")), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err()))
		}
		if m.registersUpdates() {
			g.If(jen.Err().Op(":=").Id(registerUpdatesFunc).Call(jen.Id("e")), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err()))
		}
		if m.hasCalls() {
			calls := jen.Dict{jen.Id(runtimeField): jen.Id("c")}
			if m.Receiver != nil {
				calls[jen.Id(stepsField)] = jen.Id("steps")
			}
			lit[jen.Id(callsType)] = jen.Id(callsType).Values(calls)
		}
		opts := []jen.Code{rt("WorkflowVersion").Call(jen.Id(w.versionConst()))}
		if w.Ann.Timeout > 0 {
			opts = append(opts, rt("WorkflowTimeout").Call(duration(w.Ann.Timeout)))
		}
		if w.Ann.Queue != "" {
			opts = append(opts, rt("WorkflowQueue").Call(jen.Lit(w.Ann.Queue)))
		}
		switch {
		case w.Ann.RetainForever:
			opts = append(opts, rt("WorkflowRetention").Call(jen.Lit(0)))
		case w.Ann.Retention > 0:
			opts = append(opts, rt("WorkflowRetention").Call(duration(w.Ann.Retention)))
		}
		if w.Ann.Existing != "" || w.Ann.Ended != "" {
			opts = append(opts, rt("WorkflowStartPolicies").Call(rt(existingPolicies[w.Ann.Existing]), rt(endedPolicies[w.Ann.Ended])))
		}
		if m.declaresTxSteps() {
			opts = append(opts, rt("WorkflowTxSteps").Call(jen.Id(txStepsVar)))
		}
		if decls := r.attrDecls(w); decls != nil {
			opts = append(opts, decls)
		}
		g.Return(rt("Register").Call(append([]jen.Code{jen.Id("e"), jen.Id(w.Newest.nameConst()),
			jen.Func().Params(jen.Id("c").Op("*").Add(rt("WorkflowContext")), jen.Id("in").Add(in.Clone())).
				Params(out.Clone(), jen.Error()).
				Block(jen.Return(r.ownFunc(w.GoName).Call(jen.Op("&").Id(ctx).Values(lit), jen.Id("in"))))},
			opts...)...))
	})
}

// existingPolicies and endedPolicies map the values of existing= and
// ended= ("" when absent) to the runtime's constants.
var (
	existingPolicies = map[string]string{
		"":                          "ExistingReturn",
		annotations.ExistingReturn:  "ExistingReturn",
		annotations.ExistingFail:    "ExistingFail",
		annotations.ExistingReplace: "ExistingReplace",
	}
	endedPolicies = map[string]string{
		"":                           "EndedReturn",
		annotations.EndedReturn:      "EndedReturn",
		annotations.EndedReuse:       "EndedReuse",
		annotations.EndedReject:      "EndedReject",
		annotations.EndedReuseFailed: "EndedReuseFailed",
	}
)

// policyClauses says what workflow w's existing= and ended= make a start
// of an ID whose run exists do: each "" when the key is absent.
func policyClauses(w *Workflow) (existing, ended string) {
	switch w.Ann.Existing {
	case annotations.ExistingReturn:
		existing = "returns that run, writing nothing"
	case annotations.ExistingFail:
		existing = "fails with an error matching runtime.ErrStartRefused, writing nothing"
	case annotations.ExistingReplace:
		existing = "terminates that run and starts the new one in its place, deleting the old one with its history and children"
	}
	if existing != "" {
		existing += " (existing=" + w.Ann.Existing + ")"
	}
	switch w.Ann.Ended {
	case annotations.EndedReturn:
		ended = "returns the ended run, writing nothing"
	case annotations.EndedReuse:
		ended = "starts a new run in its place, deleting the ended one with its history and children"
	case annotations.EndedReject:
		ended = "fails with an error matching runtime.ErrStartRefused"
	case annotations.EndedReuseFailed:
		ended = "starts a new run in its place when the ended one errored or was terminated, and fails with an error matching runtime.ErrStartRefused when it completed"
	}
	if ended != "" {
		ended += " (ended=" + w.Ann.Ended + ")"
	}
	return existing, ended
}

// startPolicyDoc describes a workflow's start policies from
// policyClauses (the absent one as the default), then override.
func startPolicyDoc(existing, ended, override string) string {
	if existing == "" {
		existing = "returns that run"
	}
	if ended == "" {
		ended = "returns the ended run"
	}
	return fmt.Sprintf("A start of an ID whose run exists and has not ended %s; a start of an ID whose run has ended %s. %s",
		existing, ended, override)
}

// client writes the functions that start and get runs of workflow w, the
// newest version of its name.
func (r *renderer) client(w *Workflow) {
	f := r.f
	run, durable := w.runType(), w.Ann.Name
	in, out := r.typ(w.Input().Type), r.typ(w.Output().Type)
	// handle writes the typed handle on a *runtime.Run[Out] held in r.
	handle := func(r jen.Code) *jen.Statement {
		if w.Progress != nil {
			return jen.Op("&").Id(run).Values(jen.Dict{jen.Id("Run"): r, jen.Id(runEngineField): jen.Id("e")})
		}
		return jen.Op("&").Id(run).Values(r)
	}
	ids := "With runtime.WithID, starting an ID that exists returns the existing run;"
	batchIDs := "items with an ID that exists return the existing run, unless they set IfExists or IfEnded"
	if existing, ended := policyClauses(w); existing != "" || ended != "" {
		ids = "With runtime.WithID, the workflow's start policies apply. " +
			startPolicyDoc(existing, ended, "runtime.IfExists and runtime.IfEnded override them, and")
		batchIDs = "items with an ID that exists follow the workflow's start policies, as for " + w.startFunc() +
			", unless they set IfExists or IfEnded"
	}
	f.Line()
	r.doc(fmt.Sprintf("%s starts a run of workflow %s (%s) with input in. %s runtime.WithTimeout or "+
		"runtime.WithDeadline give the run a deadline.", w.startFunc(), w.GoName, durable, ids), w.Doc)
	f.Func().Id(w.startFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id("in").Add(in.Clone()), jen.Id("opts").Op("...").Add(rt("StartOption"))).
		Params(jen.Op("*").Id(run), jen.Error()).
		Block(
			jen.List(jen.Id("r"), jen.Err()).Op(":=").Add(rt("Start")).Types(in.Clone(), out.Clone()).
				Call(jen.Id("ctx"), jen.Id("e"), jen.Id(w.nameConst()), jen.Id("in"), jen.Id("opts").Op("...")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(handle(jen.Id("r")), jen.Nil()),
		)

	f.Line()
	r.doc(fmt.Sprintf("%s starts many runs of workflow %s (%s) in one store call. Every input is checked "+
		"before anything is written; %s. The items a policy refuses are nil in the result, which comes with "+
		"an error joining a *runtime.RefusedError (matching runtime.ErrStartRefused) for each; any other "+
		"error returns no runs.", w.batchFunc(), w.GoName, durable, batchIDs), w.Doc)
	f.Func().Id(w.batchFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id("items").Index().Add(rt("BatchItem")).Types(in.Clone())).
		Params(jen.Index().Op("*").Id(run), jen.Error()).
		Block(
			jen.List(jen.Id("rs"), jen.Err()).Op(":=").Add(rt("StartBatch")).Types(in.Clone(), out.Clone()).
				Call(jen.Id("ctx"), jen.Id("e"), jen.Id(w.nameConst()), jen.Id("items")),
			jen.If(jen.Id("rs").Op("==").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Id("out").Op(":=").Make(jen.Index().Op("*").Id(run), jen.Len(jen.Id("rs"))),
			jen.For(jen.List(jen.Id("i"), jen.Id("r")).Op(":=").Range().Id("rs")).Block(
				jen.If(jen.Id("r").Op("!=").Nil()).Block(
					jen.Id("out").Index(jen.Id("i")).Op("=").Add(handle(jen.Id("r"))))),
			jen.Return(jen.Id("out"), jen.Err()),
		)

	f.Line()
	r.doc(fmt.Sprintf("%s starts a run of workflow %s (%s) with input in, as %s does, inside tx, the "+
		"application's transaction on the store's database: a pgx.Tx on Postgres (pgstore), a *sql.Tx on "+
		"SQLite (sqlitestore, on the store's file), or the Tx of e.BeginTx. The run exists exactly when tx "+
		"commits, with the application's own writes in tx: a rollback leaves no run, and no engine starts "+
		"it before the commit. The handle's Result waits for the run once it exists. Stores without "+
		"transactions (Redis, the in-memory store) refuse it with an error matching "+
		"runtime.ErrInvalidArgument.", w.startTxFunc(), w.GoName, durable, w.startFunc()), w.Doc)
	f.Func().Id(w.startTxFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id(txLocal).Any(), jen.Id("in").Add(in.Clone()), jen.Id("opts").Op("...").Add(rt("StartOption"))).
		Params(jen.Op("*").Id(run), jen.Error()).
		Block(
			jen.List(jen.Id("r"), jen.Err()).Op(":=").Add(rt("StartTx")).Types(in.Clone(), out.Clone()).
				Call(jen.Id("ctx"), jen.Id("e"), jen.Id(txLocal), jen.Id(w.nameConst()), jen.Id("in"), jen.Id("opts").Op("...")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(handle(jen.Id("r")), jen.Nil()),
		)

	f.Line()
	getDoc := fmt.Sprintf("%s returns a typed handle on the existing run id of workflow %s (%s): an error "+
		"matching runtime.ErrRunNotFound if there is none, runtime.ErrInvalidArgument if it is a run of "+
		"another workflow.", w.getFunc(), w.GoName, durable)
	if older := r.olderList(w); older != "" {
		getDoc += fmt.Sprintf(" Runs of its older versions, %s, are runs of %s too: the handle's Result "+
			"decodes their output into this version's output type.", older, durable)
	}
	r.doc(getDoc, w.Doc)
	f.Func().Id(w.getFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id("id").String()).
		Params(jen.Op("*").Id(run), jen.Error()).
		Block(
			jen.List(jen.Id("r"), jen.Err()).Op(":=").Add(rt("Get")).Types(out.Clone()).
				Call(jen.Id("ctx"), jen.Id("e"), jen.Id(w.nameConst()), jen.Id("id")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(handle(jen.Id("r")), jen.Nil()),
		)
}

// fanIn writes the methods of workflow context ctx that wait for several
// futures: runtime.All, runtime.Select and runtime.SelectCancel on the
// run's context.
func (r *renderer) fanIn(ctx string) {
	f := r.f
	f.Line()
	r.doc(fmt.Sprintf("%s waits until every one of futures has its result, and returns the error of the "+
		"first (in argument order) that failed, or nil; Await each for its value. It is runtime.All on "+
		"this run's context. For futures of one type, runtime.AwaitAll returns their values.", allMethod), "")
	f.Func().Params(jen.Id("c").Op("*").Id(ctx)).Id(allMethod).
		Params(jen.Id("futures").Op("...").Add(rt("Awaitable"))).Error().
		Block(jen.Return(rt("All").Call(jen.Id("c").Dot(embeddedField), jen.Id("futures").Op("..."))))
	f.Line()
	r.doc(fmt.Sprintf("%s waits for the first of cases to have its result and returns its index; Await it "+
		"for the result. The winner is checkpointed under name, numbered by call order (name#0, name#1, "+
		"...), so a replay returns the same case; an event future that loses is released. It is "+
		"runtime.Select on this run's context. For futures of one type, runtime.SelectFuture returns "+
		"the winner's value.", selectMethod), "")
	f.Func().Params(jen.Id("c").Op("*").Id(ctx)).Id(selectMethod).
		Params(jen.Id("name").String(), jen.Id("cases").Op("...").Add(rt("Awaitable"))).Params(jen.Int(), jen.Error()).
		Block(jen.Return(rt("Select").Call(jen.Id("c").Dot(embeddedField), jen.Id("name"), jen.Id("cases").Op("..."))))
	f.Line()
	r.doc(fmt.Sprintf("%s is %s that cancels its losers: it waits for the first of cases to have its result, "+
		"checkpoints the winner under name as %s does, and cancels every other case (see runtime.Future.Cancel), "+
		"so the run waits for none of them: a losing step's context is cancelled with runtime.ErrCanceled as "+
		"its cause and it is not retried. It is runtime.SelectCancel on this run's context.", selectCancelMethod, selectMethod, selectMethod), "")
	f.Func().Params(jen.Id("c").Op("*").Id(ctx)).Id(selectCancelMethod).
		Params(jen.Id("name").String(), jen.Id("cases").Op("...").Add(rt("Awaitable"))).Params(jen.Int(), jen.Error()).
		Block(jen.Return(rt("SelectCancel").Call(jen.Id("c").Dot(embeddedField), jen.Id("name"), jen.Id("cases").Op("..."))))
}

// detached writes the method of workflow context ctx that returns it
// detached for the cleanup after the run's cancellation.
func (r *renderer) detached(ctx string) {
	f := r.f
	f.Line()
	r.doc(fmt.Sprintf("%s returns this context for the workflow's cleanup: its calls (steps, sleeps, "+
		"waits, children, futures) run and are checkpointed after the run's cancellation, which makes "+
		"every call on c fail with an error matching runtime.ErrCanceled, and its Context is not "+
		"cancelled by it. It is runtime.WorkflowContext.Detached, typed.", detachedMethod), "")
	f.Func().Params(jen.Id("c").Op("*").Id(ctx)).Id(detachedMethod).Params().Op("*").Id(ctx).BlockFunc(func(g *jen.Group) {
		g.Id("d").Op(":=").Op("*").Id("c")
		g.Id("d").Dot(embeddedField).Op("=").Id("c").Dot(embeddedField).Dot(detachedMethod).Call()
		if r.m.hasCalls() {
			g.Id("d").Dot(callsType).Dot(runtimeField).Op("=").Id("d").Dot(embeddedField)
		}
		g.Return(jen.Op("&").Id("d"))
	})
}

// interactDoc says, for the docs of callsType and the workflow contexts,
// which methods the package's updates and streams add: "" when it has
// none.
func (m *Package) interactDoc() string {
	var parts []string
	if len(m.Updates) > 0 {
		parts = append(parts, "take each update of the package (Await<Update>, and On<Update> for its future)")
	}
	if len(m.Streams) > 0 {
		parts = append(parts, "append to each stream of the package (Append<Value>) and close it (Close<Value>Stream)")
	}
	if len(parts) == 0 {
		return ""
	}
	return " It also has methods that " + strings.Join(parts, ", and methods that ") + "."
}

// calls writes the package's callsType, the type of the typed calls every
// workflow context shares.
func (r *renderer) calls() {
	m, f := r.m, r.f
	if !m.hasCalls() {
		return
	}
	f.Line()
	r.doc(fmt.Sprintf("%s holds the typed calls of package %s, each declared once: a method per step, "+
		"per event and, to run it as a child, per workflow.%s Every workflow context embeds it, so they are "+
		"methods of each.", callsType, m.Name, m.interactDoc()), "")
	f.Type().Id(callsType).StructFunc(func(g *jen.Group) {
		g.Id(runtimeField).Op("*").Add(rt("WorkflowContext"))
		if m.Receiver != nil {
			g.Id(stepsField).Op("*").Add(r.ownType(m.Receiver.Name))
		}
	})
}

// step writes everything generated for step s, once per package: its
// checkpoint-key constant, for an autoversion step the key of an
// iteration, and its typed method on callsType.
func (r *renderer) step(s *Step) {
	m, f := r.m, r.f
	key := s.Ann.Key()
	kc, it := s.keyConst(), s.iterationFunc()
	var what string
	if s.Ann.Autoversion {
		what = fmt.Sprintf("%s is the checkpoint key of autoversion step %s; the i-th call of the step in a run "+
			"(from 0) is keyed %s(i). Outside a run, the idempotency key of call i is IdempotencyKey(%s(i), scope) "+
			"on the run's typed handle, or runtime.IdempotencyKey(workflowName, runID, %s(i), scope).", kc, s, it, it, it)
	} else {
		what = fmt.Sprintf("%s is the checkpoint key of step %s. Outside a run, the step's idempotency key "+
			"is IdempotencyKey(%s, scope) on the run's typed handle, or "+
			"runtime.IdempotencyKey(workflowName, runID, %s, scope).", kc, s, kc, kc)
	}
	f.Line()
	r.doc(what, s.Doc)
	f.Const().Id(kc).Op("=").Lit(key)
	if s.Ann.Autoversion {
		f.Line()
		r.doc(fmt.Sprintf("%s returns the checkpoint key of the i-th call (from 0) of autoversion step %s "+
			"in a run, built by runtime.IterationKey.", it, s), s.Doc)
		f.Func().Id(it).Params(jen.Id("i").Int()).String().Block(
			jen.Return(rt("IterationKey").Call(jen.Id(kc), jen.Id("i"))))
	}
	if m.hasCalls() {
		r.stepMethod(s)
		if s.hasAsync() {
			r.stepAsyncMethod(s)
		}
	}
}

// await writes the typed methods on callsType that await event e: one
// waits, one returns a future.
func (r *renderer) await(e *Event) {
	f := r.f
	f.Line()
	r.doc(fmt.Sprintf("%s suspends the run until event %s (topic %s) arrives for it, and returns it. "+
		"name is the wait's durable key within the run. A timeout above zero bounds the wait: "+
		"when it passes first, %s returns an error matching runtime.ErrEventTimeout.",
		e.awaitMethod(), e.GoName, e.Ann.Topic, e.awaitMethod()), e.Doc)
	f.Func().Params(jen.Id("c").Op("*").Id(callsType)).Id(e.awaitMethod()).
		Params(jen.Id("name").String(), jen.Id("timeout").Qual("time", "Duration")).
		Params(r.typ(e.Type), jen.Error()).
		Block(jen.Return(rt("WaitForEvent").Types(r.typ(e.Type)).Call(
			jen.Id("c").Dot(runtimeField), jen.Id("name"), jen.Id(e.topicConst()), jen.Id("timeout"))))
	f.Line()
	r.doc(fmt.Sprintf("%s returns a future of the next event %s (topic %s) for this run, without waiting: "+
		"the event is delivered while the run waits on anything, and Await, the context's All or Select "+
		"wait for it. name is the future's durable key within the run, numbered by call order (name#0, "+
		"name#1, ...), so it may be created in a loop. It has no timeout of its own: select it with "+
		"a Timer for one.", e.onMethod(), e.GoName, e.Ann.Topic), e.Doc)
	f.Func().Params(jen.Id("c").Op("*").Id(callsType)).Id(e.onMethod()).
		Params(jen.Id("name").String()).
		Params(jen.Op("*").Add(rt("Future")).Types(r.typ(e.Type))).
		Block(jen.Return(rt("OnEvent").Types(r.typ(e.Type)).Call(
			jen.Id("c").Dot(runtimeField), jen.Id("name"), jen.Id(e.topicConst()))))
}

// children writes the two methods on callsType that run workflow w as a
// child of the calling run: one waits for it, one returns a handle on it.
func (r *renderer) children(w *Workflow) {
	f := r.f
	in, out := r.typ(w.Input().Type), r.typ(w.Output().Type)
	policy := "When this run ends (it completes, errors or is terminated) before the child, the child is terminated, unless opts include runtime.ParentClose(runtime.ParentCloseAbandon)."
	f.Line()
	r.doc(fmt.Sprintf("%s runs workflow %s (%s) as a child of this run with input in, and waits for "+
		"its output. name is the call's durable key within the run: the child's run ID derives from this "+
		"run's ID and name, so a replay never starts the child twice, and takes the outcome of a child "+
		"that already finished. %s If the derived ID is taken by another run (not this run's child of %s), "+
		"the call fails with an error matching runtime.ErrChildCollision.",
		w.callMethod(), w.GoName, w.Ann.Name, policy, w.GoName), w.Doc)
	f.Func().Params(jen.Id("c").Op("*").Id(callsType)).Id(w.callMethod()).
		Params(jen.Id("name").String(), jen.Id("in").Add(in.Clone()), jen.Id("opts").Op("...").Add(rt("ChildOption"))).
		Params(out.Clone(), jen.Error()).
		Block(jen.Return(rt("CallChild").Types(out.Clone()).Call(
			jen.Id("c").Dot(runtimeField), jen.Id("name"), jen.Id(w.nameConst()), jen.Id("in"), jen.Id("opts").Op("..."))))
	f.Line()
	r.doc(fmt.Sprintf("%s starts workflow %s (%s) as a child of this run with input in, like %s, and "+
		"returns a future of its output without waiting: Await it, or pass it to the context's All or "+
		"Select. name is the call's durable key within the run, as for %s.",
		w.callAsyncMethod(), w.GoName, w.Ann.Name, w.callMethod(), w.callMethod()), w.Doc)
	f.Func().Params(jen.Id("c").Op("*").Id(callsType)).Id(w.callAsyncMethod()).
		Params(jen.Id("name").String(), jen.Id("in").Add(in.Clone()), jen.Id("opts").Op("...").Add(rt("ChildOption"))).
		Params(jen.Op("*").Add(rt("Future")).Types(out.Clone())).
		Block(jen.Return(rt("CallChildAsync").Types(out.Clone()).Call(
			jen.Id("c").Dot(runtimeField), jen.Id("name"), jen.Id(w.nameConst()), jen.Id("in"), jen.Id("opts").Op("..."))))
	f.Line()
	r.doc(fmt.Sprintf("%s starts workflow %s (%s) as a child of this run with input in, without "+
		"waiting, and returns a typed handle on it, whose Result waits for the child's output later, "+
		"durably. name is the call's durable key within the run: the child's run ID derives from this "+
		"run's ID and name, so a replay returns the same child. %s If the derived ID is taken by another "+
		"run (not this run's child of %s), the call fails with an error matching runtime.ErrChildCollision. "+
		"To start a run from outside a workflow, use %s.",
		w.startChildMethod(), w.GoName, w.Ann.Name, policy, w.GoName, w.startFunc()), w.Doc)
	f.Func().Params(jen.Id("c").Op("*").Id(callsType)).Id(w.startChildMethod()).
		Params(jen.Id("name").String(), jen.Id("in").Add(in.Clone()), jen.Id("opts").Op("...").Add(rt("ChildOption"))).
		Params(jen.Op("*").Add(rt("ChildRun")).Types(out.Clone()), jen.Error()).
		Block(jen.Return(rt("StartChild").Types(out.Clone()).Call(
			jen.Id("c").Dot(runtimeField), jen.Id("name"), jen.Id(w.nameConst()), jen.Id("in"), jen.Id("opts").Op("..."))))
}

// stepMethod writes the typed method of step s on callsType, keyed by the
// step's key constant.
func (r *renderer) stepMethod(s *Step) {
	params, call := r.stepCall(s)
	key := s.Ann.Key()
	what := fmt.Sprintf("%s runs step %s (%s) as a checkpointed step: once it succeeds (or exhausts its retries), "+
		"a replay of the run returns its recorded result without running it again.", s.method(), key, s)
	if s.Ann.Autoversion {
		what = fmt.Sprintf("%s runs step %s (%s) as a checkpointed autoversion step: it may run many times in one run, "+
			"the i-th call (from 0) keyed %s(i); a replay returns each call's recorded result without running it again.",
			s.method(), key, s, s.iterationFunc())
	}
	what += policyDoc(s)
	if tx := s.TxParam(); tx != nil {
		what += fmt.Sprintf(" It is transactional (tx): each attempt runs in a transaction of its own on the "+
			"store's database, which the step gets as its %s, and its writes there commit together with its "+
			"checkpoint, so a crash leaves both or neither and the step never applies twice; a failed attempt "+
			"rolls back what it wrote before it is retried. Only the database's writes are rolled back, not a "+
			"call to another service. It has no future form: the runtime runs a transactional step only as a "+
			"call that waits.", tx.Written)
	}
	r.f.Line()
	r.doc(what, s.Doc)
	opts := stepOptions(s, r.paramNames(s.Inputs()))
	recv := jen.Id("c").Op("*").Id(callsType)
	// fn is the function the attempts run: its context, for a
	// transactional step its transaction, and the step's call.
	fnParams := []jen.Code{jen.Id("sc").Add(rt("StepContext"))}
	step, do := "Step", "Do"
	if tx := s.TxParam(); tx != nil {
		fnParams = append(fnParams, jen.Id(txLocal).Add(r.typ(tx.Type)))
		step, do = "TxStep", "TxDo"
	}
	if o := s.Output(); o != nil {
		r.f.Func().Params(recv).Id(s.method()).Params(params...).Params(r.typ(o.Type), jen.Error()).Block(
			jen.Return(rt(step).Call(jen.Id("c").Dot(runtimeField), jen.Id(s.keyConst()), opts,
				jen.Func().Params(fnParams...).Params(r.typ(o.Type), jen.Error()).Block(call...))))
		return
	}
	r.f.Func().Params(recv).Id(s.method()).Params(params...).Error().Block(
		jen.Return(rt(do).Call(jen.Id("c").Dot(runtimeField), jen.Id(s.keyConst()), opts,
			jen.Func().Params(fnParams...).Error().Block(call...))))
}

// stepAsyncMethod writes the future-returning form of step s's method on
// callsType: the same key, options and call, through runtime.StepAsync (or
// DoAsync for a step that returns only an error).
func (r *renderer) stepAsyncMethod(s *Step) {
	params, call := r.stepCall(s)
	what := fmt.Sprintf("%s starts step %s (%s) as %s does, with the same key and policy, without waiting "+
		"for it, and returns its future: Await it for the result, or pass it to the context's All or Select. "+
		"Its attempts run beside the workflow and the run's other step futures; a step that completed "+
		"before returns a future that is ready at once.", s.asyncMethod(), s.Ann.Key(), s, s.method())
	if s.Ann.Autoversion {
		what += fmt.Sprintf(" Its call number, and so its key (%s(i)), is fixed when the future is created.", s.iterationFunc())
	}
	r.f.Line()
	r.doc(what, s.Doc)
	opts := stepOptions(s, r.paramNames(s.Inputs()))
	recv := jen.Id("c").Op("*").Id(callsType)
	if o := s.Output(); o != nil {
		r.f.Func().Params(recv).Id(s.asyncMethod()).Params(params...).Op("*").Add(rt("Future")).Types(r.typ(o.Type)).Block(
			jen.Return(rt("StepAsync").Call(jen.Id("c").Dot(runtimeField), jen.Id(s.keyConst()), opts,
				jen.Func().Params(jen.Id("sc").Add(rt("StepContext"))).Params(r.typ(o.Type), jen.Error()).Block(call...))))
		return
	}
	r.f.Func().Params(recv).Id(s.asyncMethod()).Params(params...).Op("*").Add(rt("Future")).Types(jen.Struct()).Block(
		jen.Return(rt("DoAsync").Call(jen.Id("c").Dot(runtimeField), jen.Id(s.keyConst()), opts,
			jen.Func().Params(jen.Id("sc").Add(rt("StepContext"))).Error().Block(call...))))
}

// stepCall returns the parameters of step s's methods and the body of
// the function their attempts run: the function a test put in place of
// the step's (runtime.StepOverride, one atomic load when no test ever
// did), or else the step's own.
func (r *renderer) stepCall(s *Step) ([]jen.Code, []jen.Code) {
	inputs := s.Inputs()
	names := r.paramNames(inputs)
	var params, args []jen.Code
	args = append(args, jen.Id("sc"))
	if s.TxParam() != nil {
		args = append(args, jen.Id(txLocal))
	}
	for i, p := range inputs {
		params = append(params, jen.Id(names[i]).Add(r.typ(p.Type)))
		args = append(args, jen.Id(names[i]))
	}
	own := r.ownFunc(s.GoName).Call(args...)
	if s.Recv != nil {
		own = jen.Id("c").Dot(stepsField).Dot(s.GoName).Call(args...)
	}
	return params, []jen.Code{
		jen.If(jen.List(jen.Id(overrideLocal), jen.Id("ok")).Op(":=").Add(rt("StepOverride")).Types(r.stepFuncType(s)).
			Call(jen.Id("c").Dot(runtimeField), jen.Id(s.keyConst())), jen.Id("ok")).Block(
			jen.Return(jen.Id(overrideLocal).Call(args...))),
		jen.Return(own),
	}
}

// stepFuncType writes the type of step s's function without its receiver,
// the type runtime.OverrideStep takes for it: its context, its
// transaction for a transactional step, and its inputs, then (T, error)
// or error.
func (r *renderer) stepFuncType(s *Step) *jen.Statement {
	var params, results []jen.Code
	for _, p := range s.Params {
		params = append(params, r.typ(p.Type))
	}
	for _, p := range s.Results {
		results = append(results, r.typ(p.Type))
	}
	return jen.Func().Params(params...).Params(results...)
}

// paramNames names a step method's parameters: as the step declares them,
// unless blank or shadowing something the method's body uses.
func (r *renderer) paramNames(inputs []*Param) []string {
	used := map[string]bool{}
	out := make([]string, len(inputs))
	for i, p := range inputs {
		n := p.Name
		if n == "" || n == "_" || r.reserved[n] || used[n] {
			n = fmt.Sprintf("arg%d", i+1)
			for r.reserved[n] || used[n] {
				n += "_"
			}
		}
		used[n] = true
		out[i] = n
	}
	return out
}

// policyDoc describes a step's retry policy.
func policyDoc(s *Step) string {
	a := s.Ann
	var parts []string
	if a.Retries > 0 || a.Retries == annotations.RetryForever {
		p := fmt.Sprintf(" A failed attempt is retried up to %d times", a.Retries)
		if a.Retries == annotations.RetryForever {
			p = " A failed attempt is retried until one succeeds"
		}
		if a.Backoff > 0 {
			p += fmt.Sprintf(", after %s", a.Backoff)
			if a.MaxBackoff > 0 {
				p += fmt.Sprintf(" doubling up to %s", a.MaxBackoff)
			} else {
				p += " doubling"
			}
		}
		parts = append(parts, p+".")
	}
	if a.Timeout > 0 {
		parts = append(parts, fmt.Sprintf(" Each attempt is bounded by %s.", a.Timeout))
	}
	return strings.Join(parts, "")
}

// stepOptions writes a step's runtime.StepOptions literal. names are its
// methods' parameters: the step's arguments, recorded as its Input (the
// argument of a step of one, a slice of them for a step of several) so
// that operators see what each call was given.
func stepOptions(s *Step, names []string) *jen.Statement {
	a := s.Ann
	d := jen.Dict{}
	switch len(names) {
	case 0:
	case 1:
		d[jen.Id("Input")] = jen.Id(names[0])
	default:
		args := make([]jen.Code, len(names))
		for i, n := range names {
			args[i] = jen.Id(n)
		}
		d[jen.Id("Input")] = jen.Index().Any().Values(args...)
	}
	switch {
	case a.Retries == annotations.RetryForever:
		d[jen.Id("Retries")] = rt("RetryForever")
	case a.Retries > 0:
		d[jen.Id("Retries")] = jen.Lit(a.Retries)
	}
	if a.Backoff > 0 {
		d[jen.Id("Backoff")] = duration(a.Backoff)
	}
	if a.MaxBackoff > 0 {
		d[jen.Id("MaxBackoff")] = duration(a.MaxBackoff)
	}
	switch {
	case a.Jitter == annotations.NoJitter:
		d[jen.Id("Jitter")] = rt("NoJitter")
	case a.Jitter > 0:
		d[jen.Id("Jitter")] = jen.Lit(a.Jitter)
	}
	if a.Timeout > 0 {
		d[jen.Id("Timeout")] = duration(a.Timeout)
	}
	if a.Autoversion {
		d[jen.Id("Autoversion")] = jen.True()
	}
	return rt("StepOptions").Values(d)
}

// duration writes d in the largest exact unit: 30 * time.Second.
func duration(d time.Duration) *jen.Statement {
	units := []struct {
		unit time.Duration
		name string
	}{{time.Hour, "Hour"}, {time.Minute, "Minute"}, {time.Second, "Second"}, {time.Millisecond, "Millisecond"}, {time.Microsecond, "Microsecond"}}
	for _, u := range units {
		if d%u.unit == 0 {
			if d == u.unit {
				return jen.Qual("time", u.name)
			}
			return jen.Op(strconv.FormatInt(int64(d/u.unit), 10)).Op("*").Qual("time", u.name)
		}
	}
	return jen.Qual("time", "Duration").Call(jen.Op(strconv.FormatInt(int64(d), 10)))
}

// event writes the topic constant and the typed send and emit of an event.
func (r *renderer) event(e *Event) {
	f := r.f
	f.Line()
	r.doc(fmt.Sprintf("%s is the topic of event %s.", e.topicConst(), e.GoName), e.Doc)
	f.Const().Id(e.topicConst()).Op("=").Lit(e.Ann.Topic)

	f.Line()
	r.doc(fmt.Sprintf("%s delivers ev to the run runID, which receives it when it awaits %s. "+
		"An event sent before the run waits is kept for it, so it is never lost.", e.sendFunc(), e.GoName), e.Doc)
	f.Func().Id(e.sendFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id("runID").String(), jen.Id("ev").Add(r.typ(e.Type))).Error().Block(
		jen.Return(jen.Id("e").Dot("SendEvent").Call(jen.Id("ctx"), jen.Id("runID"), jen.Id(e.topicConst()), jen.Id("ev"))))

	f.Line()
	r.doc(fmt.Sprintf("%s delivers ev to every run waiting for %s and returns how many it reached. "+
		"Runs not waiting yet do not receive it.", e.emitFunc(), e.GoName), e.Doc)
	f.Func().Id(e.emitFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id("ev").Add(r.typ(e.Type))).Params(jen.Int(), jen.Error()).Block(
		jen.Return(jen.Id("e").Dot("Emit").Call(jen.Id("ctx"), jen.Id(e.topicConst()), jen.Id("ev"))))

	txDoc := "inside tx, the application's transaction on the store's database: a pgx.Tx on Postgres " +
		"(pgstore), a *sql.Tx on SQLite (sqlitestore, on the store's file), or the Tx of e.BeginTx."
	refuse := "Stores without transactions (Redis, the in-memory store) refuse it with an error matching " +
		"runtime.ErrInvalidArgument."
	f.Line()
	r.doc(fmt.Sprintf("%s delivers ev to the run runID, as %s does, %s The event is delivered exactly when tx "+
		"commits, with the application's own writes in tx: a rollback delivers nothing. %s",
		e.sendTxFunc(), e.sendFunc(), txDoc, refuse), e.Doc)
	f.Func().Id(e.sendTxFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id(txLocal).Any(), jen.Id("runID").String(), jen.Id("ev").Add(r.typ(e.Type))).Error().Block(
		jen.Return(jen.Id("e").Dot("SendEventTx").Call(jen.Id("ctx"), jen.Id(txLocal), jen.Id("runID"), jen.Id(e.topicConst()), jen.Id("ev"))))

	f.Line()
	r.doc(fmt.Sprintf("%s delivers ev to every run waiting for %s, as %s does, %s It reaches the runs waiting "+
		"when its statement runs, and returns how many; the deliveries take effect exactly when tx commits, "+
		"with the application's own writes in tx: a rollback delivers nothing. %s",
		e.emitTxFunc(), e.GoName, e.emitFunc(), txDoc, refuse), e.Doc)
	f.Func().Id(e.emitTxFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id(txLocal).Any(), jen.Id("ev").Add(r.typ(e.Type))).Params(jen.Int(), jen.Error()).Block(
		jen.Return(jen.Id("e").Dot("EmitTx").Call(jen.Id("ctx"), jen.Id(txLocal), jen.Id(e.topicConst()), jen.Id("ev"))))

	for _, w := range r.m.Workflows {
		if w.isNewest() {
			r.sendOrStart(e, w)
		}
	}
}

// sendOrStart writes the function that delivers event e to a run of
// workflow w, the newest version of its name, starting the run if it
// does not exist.
func (r *renderer) sendOrStart(e *Event, w *Workflow) {
	f := r.f
	run := w.runType()
	in, out := r.typ(w.Input().Type), r.typ(w.Output().Type)
	policies := "An existing run that has not ended gets ev as " + e.sendFunc() + " gives it; an ended one " +
		"refuses it (runtime.ErrStartRefused) unless runtime.IfEnded in opts lets a new run start in its place, " +
		"which then gets it."
	if existing, ended := policyClauses(w); existing != "" || ended != "" {
		policies = "The workflow's start policies apply as to " + w.startFunc() + ", and runtime.IfExists and " +
			"runtime.IfEnded in opts override them: an existing run that has not ended and is not replaced gets ev " +
			"as " + e.sendFunc() + " gives it; an ended run that is not replaced refuses it (runtime.ErrStartRefused)."
	}
	f.Line()
	r.doc(fmt.Sprintf("%s delivers ev (event %s, topic %s) to the run id of workflow %s (%s), starting that run "+
		"with input in if it does not exist, in one atomic store change (signal-with-start): concurrent calls "+
		"for one ID create one run, which receives every call's event, and a call that fails or is refused "+
		"writes nothing. %s It returns a typed handle on the run that got ev. It has no form inside the "+
		"application's transaction, to keep the API small: runtime.SendOrStartTx is that, untyped.",
		sendOrStartFunc(e, w), e.GoName, e.Ann.Topic, w.GoName, w.Ann.Name, policies), "")
	handle := jen.Op("&").Id(run).Values(jen.Id("r"))
	if w.Progress != nil {
		handle = jen.Op("&").Id(run).Values(jen.Dict{jen.Id("Run"): jen.Id("r"), jen.Id(runEngineField): jen.Id("e")})
	}
	f.Func().Id(sendOrStartFunc(e, w)).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id("id").String(), jen.Id("in").Add(in.Clone()), jen.Id("ev").Add(r.typ(e.Type)), jen.Id("opts").Op("...").Add(rt("StartOption"))).
		Params(jen.Op("*").Id(run), jen.Error()).
		Block(
			jen.List(jen.Id("r"), jen.Err()).Op(":=").Add(rt("SendOrStart")).Types(in.Clone(), out.Clone()).
				Call(jen.Id("ctx"), jen.Id("e"), jen.Id(w.nameConst()), jen.Id("id"), jen.Id("in"), jen.Id(e.topicConst()), jen.Id("ev"), jen.Id("opts").Op("...")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(handle, jen.Nil()),
		)
}

// txSteps writes the variable holding the package's transactional steps,
// which every Register function passes to runtime.WorkflowTxSteps.
func (r *renderer) txSteps() {
	m := r.m
	if !m.declaresTxSteps() {
		return
	}
	var list []string
	for _, s := range m.Steps {
		if tx := s.TxParam(); tx != nil {
			list = append(list, fmt.Sprintf("%s (%s)", s.Ann.Key(), tx.Written))
		}
	}
	r.f.Line()
	r.doc(fmt.Sprintf("%s holds the transactional steps of package %s, by checkpoint key, with the transaction "+
		"type each takes: %s. Every Register function of the package passes it to runtime.WorkflowTxSteps, so "+
		"that registering on a store without transactions, or with transactions of another type, fails naming "+
		"the step.", txStepsVar, m.Name, strings.Join(list, ", ")), "")
	r.f.Var().Id(txStepsVar).Op("=").Map(jen.String()).Qual("reflect", "Type").Values(jen.DictFunc(func(d jen.Dict) {
		for _, s := range m.Steps {
			if tx := s.TxParam(); tx != nil {
				d[jen.Id(s.keyConst())] = jen.Qual("reflect", "TypeFor").Types(r.typ(tx.Type)).Call()
			}
		}
	}))
}

// eventList names a package's events with their topics.
func eventList(events []*Event) string {
	var list []string
	for _, e := range events {
		list = append(list, fmt.Sprintf("%s on %s", e.GoName, e.Ann.Topic))
	}
	return strings.Join(list, ", ")
}

// registerEvents writes the one function that registers every event type
// of the package, which each Register<W> calls.
func (r *renderer) registerEvents() {
	m := r.m
	if !m.registersEvents() {
		return
	}
	r.f.Line()
	r.doc(fmt.Sprintf("%s registers the event types of package %s with e, for the store's catalog: %s. "+
		"Every Register function of the package calls it.", registerEventsFunc, m.Name, eventList(m.Events)), "")
	r.f.Func().Id(registerEventsFunc).Params(jen.Id("e").Op("*").Add(rt("Engine"))).Error().BlockFunc(func(g *jen.Group) {
		for _, e := range m.Events {
			g.If(jen.Err().Op(":=").Add(rt("RegisterEvent")).Types(r.typ(e.Type)).Call(jen.Id("e"), jen.Id(e.topicConst())),
				jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err()))
		}
		g.Return(jen.Nil())
	})
}

// registerAll writes the function that registers every workflow.
func (r *renderer) registerAll() {
	m := r.m
	if len(m.Workflows) == 0 {
		return
	}
	var list []string
	for _, w := range m.Workflows {
		if len(m.versions(w)) > 1 {
			list = append(list, fmt.Sprintf("%s (%s version %d)", w.GoName, w.Ann.Name, w.Ann.Version))
		} else {
			list = append(list, fmt.Sprintf("%s (%s)", w.GoName, w.Ann.Name))
		}
	}
	params := []jen.Code{jen.Id("e").Op("*").Add(rt("Engine"))}
	args := []jen.Code{jen.Id("e")}
	if m.Receiver != nil {
		params = append(params, jen.Id("steps").Op("*").Add(r.ownType(m.Receiver.Name)))
		args = append(args, jen.Id("steps"))
	}
	r.f.Line()
	r.doc(fmt.Sprintf("%s registers every workflow of package %s with e: %s.", registerAllFunc, m.Name, strings.Join(list, ", ")), "")
	r.f.Func().Id(registerAllFunc).Params(params...).Error().BlockFunc(func(g *jen.Group) {
		for _, w := range m.Workflows {
			g.If(jen.Err().Op(":=").Id(w.registerFunc()).Call(args...), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err()))
		}
		g.Return(jen.Nil())
	})
}
