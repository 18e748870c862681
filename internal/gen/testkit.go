package gen

// This file renders the test-helper package of an annotated package,
// <pkg>stemtest/stem_gen.go: typed step mocks on a stemtest.Env's engine,
// events sent at a virtual time, and a crash test per workflow, all built
// on the stemtest kit. It is a package of its own, importing testing, so
// that nothing of it reaches a program: only tests import it.

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// stemtestPath is the import path of the test kit the helpers build on.
const stemtestPath = "github.com/stemflow/stem/stemtest"

// helperImports are the packages the test-helper package itself uses,
// which get their own names first.
var helperImports = []struct{ path, name string }{
	{runtimePath, "runtime"},
	{stemtestPath, "stemtest"},
	{"sync", "sync"},
	{"testing", "testing"},
	{"time", "time"},
}

// helperItems returns what the test-helper package has a helper for: the
// steps, events and (newest) workflows whose types another package can
// name.
func (m *Package) helperItems() (steps []*Step, events []*Event, workflows []*Workflow) {
	for _, s := range m.Steps {
		if s.helperOK() {
			steps = append(steps, s)
		}
	}
	for _, e := range m.Events {
		if exportable(e.Type) {
			events = append(events, e)
		}
	}
	for _, w := range m.Workflows {
		if w.helperOK() {
			workflows = append(workflows, w)
		}
	}
	return steps, events, workflows
}

// helperOK reports whether the workflow gets a crash test: it is the
// newest version of its name, and another package can name its input.
// (check reports a workflow without an input.)
func (w *Workflow) helperOK() bool {
	return w.isNewest() && len(w.Params) == 2 && exportable(w.Input().Type)
}

// mockOK reports whether the workflow gets a mock too: another package can
// name its output as well.
func (w *Workflow) mockOK() bool {
	return w.helperOK() && len(w.Results) == 2 && exportable(w.Output().Type)
}

// crashWorkflows returns the workflows the test-helper package has a crash
// test for: those helperItems gives, unless the package has transactional
// steps. The crash test runs each case on an in-memory store, which has no
// transactions, so registering the package's workflows there fails.
func (m *Package) crashWorkflows() []*Workflow {
	if m.hasTxSteps() {
		return nil
	}
	_, _, workflows := m.helperItems()
	return workflows
}

// txStepKeys lists the checkpoint keys of the package's transactional
// steps.
func (m *Package) txStepKeys() string {
	var keys []string
	for _, s := range m.Steps {
		if s.Ann.Tx {
			keys = append(keys, s.Ann.Key())
		}
	}
	return strings.Join(keys, ", ")
}

// mockedWorkflows returns the workflows the test-helper package has a mock
// for.
func (m *Package) mockedWorkflows() []*Workflow {
	var out []*Workflow
	_, _, workflows := m.helperItems()
	for _, w := range workflows {
		if w.mockOK() {
			out = append(out, w)
		}
	}
	return out
}

// mocksPos is where the package's mocks come from, for diagnostics: its
// first step with a mock, else its first workflow with one.
func (m *Package) mocksPos() token.Pos {
	steps, _, _ := m.helperItems()
	if len(steps) > 0 {
		return steps[0].Pos
	}
	if ws := m.mockedWorkflows(); len(ws) > 0 {
		return ws[0].Pos
	}
	return token.NoPos
}

// helperOK reports whether another package can name every type of the
// step's function.
func (s *Step) helperOK() bool {
	for _, p := range slices.Concat(s.Params, s.Results) {
		if !exportable(p.Type) {
			return false
		}
	}
	return true
}

// leftOut names what the test-helper package has no helper for, its
// types being unexported, or returns "".
func (m *Package) leftOut() string {
	var out []string
	for _, s := range m.Steps {
		if !s.helperOK() {
			out = append(out, "step "+s.String())
		}
	}
	for _, e := range m.Events {
		if !exportable(e.Type) {
			out = append(out, "event "+e.GoName)
		}
	}
	for _, w := range m.Workflows {
		switch {
		case w.isNewest() && !w.helperOK():
			out = append(out, "workflow "+w.GoName)
		case w.helperOK() && !w.mockOK():
			out = append(out, "the mock of workflow "+w.GoName)
		}
	}
	return strings.Join(out, ", ")
}

// exportable reports whether another package can write type t, with the
// same identity: every named type in it exported, every struct field too.
func exportable(t *Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind {
	case KindNamed:
		if t.Path != "" && !token.IsExported(t.Name) {
			return false
		}
		for _, a := range t.Args {
			if !exportable(a) {
				return false
			}
		}
		return true
	case KindBasic:
		return true
	case KindPointer, KindSlice, KindArray:
		return exportable(t.Elem)
	case KindMap:
		return exportable(t.Key) && exportable(t.Elem)
	case KindStruct:
		for _, f := range t.Fields {
			if !token.IsExported(f.Name) || !exportable(f.Type) {
				return false
			}
		}
		return true
	}
	return false
}

// helperFile returns the package's test-helper file; or, when the package
// gets none and stemgen wrote one before, its removal. A file there that
// stemgen did not write is an error when stemgen would write it.
func helperFile(lp *loadedPackage, m *Package, d *diagnostics) []File {
	path := filepath.Join(lp.dir, m.helperName(), GenFileName)
	old, err := os.ReadFile(path)
	exists := err == nil
	ours := exists && bytes.HasPrefix(old, []byte(header))
	if m.empty() || !m.hasHelper() {
		if ours {
			return []File{{Path: path, PruneDir: true}}
		}
		return nil
	}
	if exists && !ours {
		d.addPath(path, fmt.Sprintf("%s exists and was not generated by stemgen; rename it (or its directory) so stemgen can write the test helpers of package %s there", filepath.Join(m.helperName(), GenFileName), m.Name))
		return nil
	}
	src, err := renderHelper(m)
	if err != nil {
		d.addPath(path, "internal error rendering: "+err.Error())
		return nil
	}
	return []File{{Path: path, Content: src}}
}

// isHelperPackage reports whether the loaded package is a test-helper
// package stemgen wrote: its stem_gen.go is stemgen's, and it is named
// <parent>stemtest in a directory of that name below package <parent>.
// The parent's generation writes or removes it; its own leaves it alone.
func isHelperPackage(lp *loadedPackage) bool {
	if !lp.hasGenFile || lp.pkg == nil {
		return false
	}
	name := lp.pkg.Name
	parent, ok := strings.CutSuffix(name, helperSuffix)
	if !ok || parent == "" || filepath.Base(lp.dir) != name {
		return false
	}
	return packageNameIn(filepath.Dir(lp.dir)) == parent
}

// packageNameIn returns the package clause of the first Go file (not a
// test) in dir that has one, or "".
func packageNameIn(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if name := packageClause(filepath.Join(dir, n)); name != "" {
			return name
		}
	}
	return ""
}

// packageClause returns the package name of the Go file at path, or "".
func packageClause(path string) string {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
	if err != nil {
		return ""
	}
	return f.Name.Name
}

// renderHelper returns the package's test-helper file, gofmt'd.
func renderHelper(m *Package) ([]byte, error) {
	r := &renderer{m: m, f: jen.NewFilePathName(m.helperPath(), m.helperName()), reserved: map[string]bool{}}
	r.f.HeaderComment(header)
	steps, events, _ := m.helperItems()
	workflows := m.crashWorkflows()
	r.helperDoc(steps, events, workflows)
	r.helperImports()
	mocked := m.mockedWorkflows()
	if len(steps) > 0 || len(mocked) > 0 {
		r.mocks()
		for _, s := range steps {
			r.mock(s)
		}
		for _, w := range mocked {
			r.workflowMock(w)
		}
		r.recorder()
	}
	for _, e := range events {
		r.eventAt(e)
	}
	for _, w := range workflows {
		r.crash(w)
	}
	var buf bytes.Buffer
	if err := r.f.Render(&buf); err != nil {
		return nil, err
	}
	return groupImports(buf.Bytes())
}

// helperDoc writes the package doc comment.
func (r *renderer) helperDoc(steps []*Step, events []*Event, workflows []*Workflow) {
	m := r.m
	pc := func(text string) {
		for _, line := range wrap(text, 76) {
			r.f.PackageComment(line)
		}
	}
	item := func(text string) {
		for i, line := range wrap(text, 72) {
			if i == 0 {
				r.f.PackageComment("  - " + line)
			} else {
				r.f.PackageComment("    " + line)
			}
		}
	}
	pc(fmt.Sprintf("Package %s holds test helpers for the workflows of package %s (%s), generated by stemgen "+
		"from its annotations, on the stemtest kit:", m.helperName(), m.Name, m.Path))
	r.f.PackageComment("")
	if len(steps) > 0 || len(m.mockedWorkflows()) > 0 {
		item(fmt.Sprintf("%s, whose %s put a test's own function in place of a step or a workflow of package %s "+
			"on a stemtest.Env's engine (a workflow even where the test does not register it, as a parent in "+
			"another package calls it as a child) and record the inputs of every call, with assertions on them;",
			mockFunc, mocksType, m.Name))
	}
	if len(events) > 0 {
		item(fmt.Sprintf("Send<Event>At and Emit<Event>At, which deliver an event of package %s when the "+
			"env's virtual clock reaches a time;", m.Name))
	}
	if len(workflows) > 0 {
		item("CrashEveryStep<Workflow>, which kills a workflow's worker at each of its steps and checks " +
			"that the resumed run ends as it would have.")
	}
	r.f.PackageComment("")
	pc(fmt.Sprintf("Only tests should import it: it imports testing, which a program should not link. "+
		"Import it from the package's external tests (package %s_test): the package's own test files "+
		"cannot, since it imports %s.", m.Name, m.Name))
	if left := m.leftOut(); left != "" {
		r.f.PackageComment("")
		pc(fmt.Sprintf("It has no helper for %s, whose types another package cannot name.", left))
	}
	if m.hasTxSteps() {
		r.f.PackageComment("")
		pc(fmt.Sprintf("It has no crash test (CrashEveryStep<Workflow>): package %s has transactional steps (%s), "+
			"which need a store with transactions, and the crash test runs each case on the in-memory store, "+
			"which has none. Its mocks work on an env whose store has transactions (stemtest.WithStore with "+
			"an sqlitestore, say): the workflows of package %s do not register on another.", m.Name, m.txStepKeys(), m.Name))
	}
}

// helperImports names every imported package of the test-helper
// package: its own name unless that is taken by an identifier of the
// package, a local or another import; then name1, name2, ...
func (r *renderer) helperImports() {
	m := r.m
	taken := map[string]bool{}
	for n := range helperLocals {
		taken[n] = true
	}
	for _, g := range m.helperNames() {
		taken[g.name] = true
	}
	for _, n := range []string{"error", "string", "int", "any", "nil", "true", "false", "append", "len"} {
		taken[n] = true
	}
	names := map[string]string{m.Path: m.Name}
	add := func(path, name string) {
		if _, ok := names[path]; !ok {
			names[path] = name
		}
	}
	steps, events, workflows := m.helperItems()
	for _, s := range steps {
		for _, p := range slices.Concat(s.Params, s.Results) {
			p.Type.Paths(add)
		}
	}
	for _, e := range events {
		e.Type.Paths(add)
	}
	for _, w := range workflows {
		w.Input().Type.Paths(add)
		if w.mockOK() {
			w.Output().Type.Paths(add)
		}
	}
	var order []string
	for _, hi := range helperImports {
		order = append(order, hi.path)
		names[hi.path] = hi.name
	}
	order = append(order, m.Path)
	r.importAll(order, names, taken)
	// The function a mock installs uses m, h, fn, its ctx parameter, the
	// imports and the package's identifiers; its other parameters must not
	// shadow them.
	for _, g := range m.helperNames() {
		r.reserved[g.name] = true
	}
	for _, n := range []string{"m", "h", "fn", "ctx", txLocal} {
		r.reserved[n] = true
	}
}

// pkg writes an identifier of the annotated package, qualified.
func (r *renderer) pkg(name string) *jen.Statement { return jen.Qual(r.m.Path, name) }

// mocks writes mocksType and mockFunc.
func (r *renderer) mocks() {
	m, f := r.m, r.f
	f.Line()
	r.doc(fmt.Sprintf("%s replaces step and workflow implementations of package %s on a test's engine: each "+
		"method puts a function in place of one step's or workflow's, for every run of the engine (and of the "+
		"engines the env starts after a crash), and returns a handle on the calls it gets, with assertions on "+
		"them. A step keeps its key, options, retries and checkpoints, a workflow its name and version: only what "+
		"runs changes, and a replay still returns the recorded results without calling anything. "+
		"Get it from %s.", mocksType, m.Name, mockFunc), "")
	f.Type().Id(mocksType).Struct(jen.Id("env").Op("*").Qual(stemtestPath, "Env"))
	f.Line()
	r.doc(fmt.Sprintf("%s returns the %s of env: its methods replace step and workflow implementations on "+
		"env's engine for this test (the engine is the test's own, so nothing needs undoing). Mock before "+
		"starting the runs that should see the mocks; in CrashEveryStep, from stemtest.Setup.", mockFunc, mocksType), "")
	f.Func().Id(mockFunc).Params(jen.Id("env").Op("*").Qual(stemtestPath, "Env")).Op("*").Id(mocksType).Block(
		jen.Return(jen.Op("&").Id(mocksType).Values(jen.Dict{jen.Id("env"): jen.Id("env")})))
}

// mock writes the method of mocksType that replaces step s, the handle it
// returns and the struct of a call's inputs.
func (r *renderer) mock(s *Step) {
	f := r.f
	key := s.Ann.Key()
	inputs := s.Inputs()
	fields := callFields(inputs)
	// fn's type names the parameters as the step declares them; the
	// function installed in its place names them apart from the locals.
	declared := func() *jen.Statement {
		var params, results []jen.Code
		for _, p := range s.Params {
			params = append(params, jen.Id(p.Name).Add(r.typ(p.Type)))
			if p.Name == "" {
				params[len(params)-1] = r.typ(p.Type)
			}
		}
		for _, p := range s.Results {
			results = append(results, r.typ(p.Type))
		}
		return jen.Func().Params(params...).Params(results...)
	}
	// The parameters before the inputs: the context, and a transactional
	// step's transaction.
	lead := []string{"ctx"}
	if s.TxParam() != nil {
		lead = append(lead, txLocal)
	}
	names := append(lead, r.paramNames(inputs)...)
	var params, args []jen.Code
	call := jen.Dict{}
	for i, p := range s.Params {
		params = append(params, jen.Id(names[i]).Add(r.typ(p.Type)))
		args = append(args, jen.Id(names[i]))
		if i >= len(lead) {
			call[jen.Id(fields[i-len(lead)])] = jen.Id(names[i])
		}
	}
	var results []jen.Code
	for _, p := range s.Results {
		results = append(results, r.typ(p.Type))
	}
	every := "every attempt of the step"
	if s.Ann.Autoversion {
		every = fmt.Sprintf("every attempt of every call of the autoversion step (keyed %s#0, %s#1, ...)", key, key)
	}
	with, tx := "the attempt's context and the step's inputs", ""
	if s.TxParam() != nil {
		with = "the attempt's context, its transaction and the step's inputs"
		tx = " The step stays transactional: what fn writes in the transaction commits with the step's " +
			"checkpoint, and the env's store must have transactions (stemtest.WithStore)."
	}
	f.Line()
	r.doc(fmt.Sprintf("%s puts fn in place of step %s (%s) on the env's engine: from the step's next attempt "+
		"on, %s, in every run, calls fn with %s, and the handle "+
		"returned records each call. The step keeps its key, options, retries and checkpoints.%s Calling %s "+
		"again replaces fn, with a new handle; a nil fn gives the step its own function back.",
		s.mockMethod(), key, s, every, with, tx, s.mockMethod()), s.Doc)
	keyConst := r.pkg(s.keyConst())
	f.Func().Params(jen.Id("m").Op("*").Id(mocksType)).Id(s.mockMethod()).Params(jen.Id("fn").Add(declared())).
		Op("*").Id(s.mockType()).Block(
		jen.Id("h").Op(":=").Op("&").Id(s.mockType()).Values(),
		jen.If(jen.Id("fn").Op("==").Nil()).Block(
			jen.Qual(stemtestPath, "MockStep").Call(jen.Id("m").Dot("env"), keyConst.Clone(), jen.Nil()),
			jen.Return(jen.Id("h"))),
		jen.Qual(stemtestPath, "MockStep").Call(jen.Id("m").Dot("env"), keyConst.Clone(),
			jen.Func().Params(params...).Params(results...).Block(
				jen.Id("h").Dot(callsField).Dot("add").Call(jen.Id(s.callType()).Values(call)),
				jen.Return(jen.Id("fn").Call(args...)))),
		jen.Return(jen.Id("h")))

	f.Line()
	r.doc(fmt.Sprintf("%s records the calls of step %s (%s) that %s.%s put fn in place of, safe for "+
		"concurrent use (the attempts of step futures run beside each other).", s.mockType(), key, s, mocksType, s.mockMethod()), "")
	f.Type().Id(s.mockType()).Struct(jen.Id(callsField).Id(recorderType).Types(jen.Id(s.callType())))
	f.Line()
	r.doc(fmt.Sprintf("%s returns the inputs of every attempt that called fn, in the order they began.", callsMethod), "")
	f.Func().Params(jen.Id("h").Op("*").Id(s.mockType())).Id(callsMethod).Params().Index().Id(s.callType()).Block(
		jen.Return(jen.Id("h").Dot(callsField).Dot("all").Call()))
	f.Line()
	r.doc(fmt.Sprintf("%s returns how many attempts called fn.", countMethod), "")
	f.Func().Params(jen.Id("h").Op("*").Id(s.mockType())).Id(countMethod).Params().Int().Block(
		jen.Return(jen.Id("h").Dot(callsField).Dot("count").Call()))
	r.expects(s.mockType(), fmt.Sprintf("%s: mock of step %s (%s)", r.m.helperName(), key, s),
		"attempts", jen.Id(s.callType()), jen.Id("h").Dot(callsMethod).Call())

	f.Line()
	r.doc(fmt.Sprintf("%s holds the inputs of one attempt of step %s (%s), as fn received them.", s.callType(), key, s), "")
	f.Type().Id(s.callType()).StructFunc(func(g *jen.Group) {
		for i, p := range inputs {
			what := fmt.Sprintf("input %s", p.Name)
			if p.Name == "" || p.Name == "_" {
				what = fmt.Sprintf("input #%d (unnamed)", i+1)
			}
			g.Comment(fmt.Sprintf("%s is the step's %s.", fields[i], what))
			g.Id(fields[i]).Add(r.typ(p.Type))
		}
	})
}

// expects writes the assertions of a mock handle: on the number of calls,
// one call, and any call. what names the mock in a failure; unit says
// what a call is (attempts, runs); want is the type a call is compared
// as, and calls the expression listing the calls as that type.
func (r *renderer) expects(handle, what, unit string, want *jen.Statement, calls *jen.Statement) {
	f := r.f
	tb := jen.Id("t").Qual("testing", "TB")
	recv := jen.Id("h").Op("*").Id(handle)
	helper := jen.Id("t").Dot("Helper").Call()
	f.Line()
	r.doc(fmt.Sprintf("%s reports an error on t, listing the calls, unless n %s called fn; it reports whether they did.",
		expectCountMethod, unit), "")
	f.Func().Params(recv.Clone()).Id(expectCountMethod).Params(tb.Clone(), jen.Id("n").Int()).Bool().Block(
		helper.Clone(),
		jen.Return(jen.Qual(stemtestPath, "ExpectCount").Call(jen.Id("t"), jen.Lit(what), calls.Clone(), jen.Id("n"))))
	f.Line()
	r.doc(fmt.Sprintf("%s reports an error on t, with what it got and want, unless call i (from 0, in the order "+
		"of %s) was made with want (as reflect.DeepEqual compares); it reports whether it was.", expectCallMethod, callsMethod), "")
	f.Func().Params(recv.Clone()).Id(expectCallMethod).Params(tb.Clone(), jen.Id("i").Int(), jen.Id("want").Add(want.Clone())).Bool().Block(
		helper.Clone(),
		jen.Return(jen.Qual(stemtestPath, "ExpectCall").Call(jen.Id("t"), jen.Lit(what), calls.Clone(), jen.Id("i"), jen.Id("want"))))
	f.Line()
	r.doc(fmt.Sprintf("%s reports an error on t, listing the calls, unless a call was made with want (as "+
		"reflect.DeepEqual compares); it reports whether one was.", expectWithMethod), "")
	f.Func().Params(recv.Clone()).Id(expectWithMethod).Params(tb.Clone(), jen.Id("want").Add(want.Clone())).Bool().Block(
		helper.Clone(),
		jen.Return(jen.Qual(stemtestPath, "ExpectCalledWith").Call(jen.Id("t"), jen.Lit(what), calls.Clone(), jen.Id("want"))))
}

// workflowMock writes the method of mocksType that mocks workflow w, the
// newest version of its name, the handle it returns and the struct of a
// call.
func (r *renderer) workflowMock(w *Workflow) {
	m, f := r.m, r.f
	in, out := r.typ(w.Input().Type), r.typ(w.Output().Type)
	name := r.paramNames([]*Param{w.Input()})[0]
	declared := w.Input().Name
	if declared == "" || declared == "_" {
		declared = name
	}
	fnType := func(param string) *jen.Statement {
		return jen.Func().Params(jen.Id("ctx").Op("*").Qual(runtimePath, "WorkflowContext"), jen.Id(param).Add(in.Clone())).
			Params(out.Clone(), jen.Error())
	}
	nameConst := r.pkg(w.nameConst())
	f.Line()
	r.doc(fmt.Sprintf("%s puts fn in place of workflow %s (%s) on the env's engine, for its runs from their "+
		"next execution on, and returns a handle recording each run fn serves. Where the test registers the "+
		"workflow, fn overrides its function; where it does not (a parent in another package calls it as a "+
		"child), fn is registered under its name, at version %s.%s%s, as a stand-in. Either way a child call "+
		"starts a real child run on the engine, which calls fn, and the parent gets fn's output or error, "+
		"checkpointed as a child's: the parent's replays do not call fn again. fn gets the run's "+
		"*runtime.WorkflowContext rather than %s, so that it needs none of the package's steps and behaves "+
		"alike whether or not the test registers the workflow; it can still sleep, wait for events and read "+
		"RunID and ParentID. Like any workflow function it runs again from the top when its own run is "+
		"replayed (after a sleep, say), so it must be deterministic. Calling %s again replaces fn, with a new "+
		"handle; a nil fn gives a registered workflow its own function back.",
		w.mockMethod(), w.Ann.Name, w.GoName, m.Name, w.versionConst(), standInAttrs(w), w.contextType(), w.mockMethod()), w.Doc)
	opts := []jen.Code{jen.Qual(runtimePath, "WorkflowVersion").Call(r.pkg(w.versionConst()))}
	if decls := r.attrDecls(w); decls != nil {
		// A stand-in's runs get the workflow's attributes from their input
		// as the workflow's own would.
		opts = append(opts, decls)
	}
	f.Func().Params(jen.Id("m").Op("*").Id(mocksType)).Id(w.mockMethod()).Params(jen.Id("fn").Add(fnType(declared))).
		Op("*").Id(w.mockType()).Block(
		jen.Id("h").Op(":=").Op("&").Id(w.mockType()).Values(),
		jen.If(jen.Id("fn").Op("==").Nil()).Block(
			jen.Qual(stemtestPath, "MockWorkflow").Types(in.Clone(), out.Clone()).Call(jen.Id("m").Dot("env"), nameConst.Clone(), jen.Nil()),
			jen.Return(jen.Id("h"))),
		jen.Qual(stemtestPath, "MockWorkflow").Call(append([]jen.Code{jen.Id("m").Dot("env"), nameConst.Clone(),
			fnType(name).Block(
				jen.Id("h").Dot(callsField).Dot("addRun").Call(jen.Id("ctx").Dot("RunID").Call(), jen.Id(w.callType()).Values(
					jen.Line().Id("Input").Op(":").Id(name),
					jen.Line().Id("RunID").Op(":").Id("ctx").Dot("RunID").Call(),
					jen.Line().Id("ParentID").Op(":").Id("ctx").Dot("ParentID").Call().Op(",").Line(),
				)),
				jen.Return(jen.Id("fn").Call(jen.Id("ctx"), jen.Id(name))))},
			opts...)...),
		jen.Return(jen.Id("h")))

	f.Line()
	r.doc(fmt.Sprintf("%s records the runs of workflow %s (%s) that %s.%s put fn in place of, one call per "+
		"run (however often the run's replays call fn), safe for concurrent use.", w.mockType(), w.Ann.Name, w.GoName, mocksType, w.mockMethod()), "")
	f.Type().Id(w.mockType()).Struct(jen.Id(callsField).Id(recorderType).Types(jen.Id(w.callType())))
	recv := jen.Id("h").Op("*").Id(w.mockType())
	f.Line()
	r.doc(fmt.Sprintf("%s returns a call for every run that called fn, in the order their first calls began.", callsMethod), "")
	f.Func().Params(recv.Clone()).Id(callsMethod).Params().Index().Id(w.callType()).Block(
		jen.Return(jen.Id("h").Dot(callsField).Dot("all").Call()))
	f.Line()
	r.doc(fmt.Sprintf("%s returns how many runs called fn.", countMethod), "")
	f.Func().Params(recv.Clone()).Id(countMethod).Params().Int().Block(
		jen.Return(jen.Id("h").Dot(callsField).Dot("count").Call()))
	f.Line()
	f.Comment("// inputs returns the input of every call, in the order of Calls.")
	f.Func().Params(recv.Clone()).Id("inputs").Params().Index().Add(in.Clone()).Block(
		jen.Var().Id("out").Index().Add(in.Clone()),
		jen.For(jen.List(jen.Id("_"), jen.Id("c")).Op(":=").Range().Id("h").Dot(callsField).Dot("all").Call()).Block(
			jen.Id("out").Op("=").Append(jen.Id("out"), jen.Id("c").Dot("Input"))),
		jen.Return(jen.Id("out")))
	r.expects(w.mockType(), fmt.Sprintf("%s: mock of workflow %s (%s)", m.helperName(), w.Ann.Name, w.GoName),
		"runs", in.Clone(), jen.Id("h").Dot("inputs").Call())

	f.Line()
	r.doc(fmt.Sprintf("%s is one run of workflow %s (%s) that called the fn of %s.%s.", w.callType(), w.Ann.Name, w.GoName, mocksType, w.mockMethod()), "")
	f.Type().Id(w.callType()).Struct(
		jen.Comment("Input is the run's input, as fn received it."),
		jen.Id("Input").Add(in.Clone()),
		jen.Comment("RunID is the run's ID; a child's derives from its parent's run ID"),
		jen.Comment("and the call's name."),
		jen.Id("RunID").String(),
		jen.Comment("ParentID is the ID of the run that called it as a child, or \"\" for"),
		jen.Comment("a run started on its own."),
		jen.Id("ParentID").String(),
	)
}

// callFields names the fields of a step's call struct: its inputs'
// names, capitalised; Arg1, Arg2, ... for unnamed ones; with a suffix when
// two would be the same.
func callFields(inputs []*Param) []string {
	used := map[string]bool{}
	out := make([]string, len(inputs))
	for i, p := range inputs {
		n := exported(p.Name)
		if p.Name == "" || p.Name == "_" {
			n = fmt.Sprintf("Arg%d", i+1)
		}
		for base, k := n, 2; used[n]; k++ {
			n = base + strconv.Itoa(k)
		}
		used[n] = true
		out[i] = n
	}
	return out
}

// recorder writes the generic type that records a mock's calls.
func (r *renderer) recorder() {
	f := r.f
	lock := func() []jen.Code {
		return []jen.Code{
			jen.Id("r").Dot("mu").Dot("Lock").Call(),
			jen.Defer().Id("r").Dot("mu").Dot("Unlock").Call(),
		}
	}
	recv := jen.Id("r").Op("*").Id(recorderType).Types(jen.Id("T"))
	f.Line()
	r.doc(fmt.Sprintf("%s holds the calls of one mock, in the order they began, safe for concurrent use.", recorderType), "")
	f.Type().Id(recorderType).Types(jen.Id("T").Any()).Struct(
		jen.Id("mu").Qual("sync", "Mutex"),
		jen.Id(callsField).Index().Id("T"),
		jen.Comment("runs holds the runs recorded by addRun."),
		jen.Id("runs").Map(jen.String()).Bool(),
	)
	f.Line()
	f.Comment("// add records a call.")
	f.Func().Params(recv.Clone()).Id("add").Params(jen.Id("call").Id("T")).Block(append(lock(),
		jen.Id("r").Dot(callsField).Op("=").Append(jen.Id("r").Dot(callsField), jen.Id("call")))...)
	f.Line()
	f.Comment("// addRun records a call of the run runID, unless one is recorded: a")
	f.Comment("// workflow function runs again on each replay of its run.")
	f.Func().Params(recv.Clone()).Id("addRun").Params(jen.Id("runID").String(), jen.Id("call").Id("T")).Block(append(lock(),
		jen.If(jen.Id("r").Dot("runs").Index(jen.Id("runID"))).Block(jen.Return()),
		jen.If(jen.Id("r").Dot("runs").Op("==").Nil()).Block(
			jen.Id("r").Dot("runs").Op("=").Map(jen.String()).Bool().Values()),
		jen.Id("r").Dot("runs").Index(jen.Id("runID")).Op("=").True(),
		jen.Id("r").Dot(callsField).Op("=").Append(jen.Id("r").Dot(callsField), jen.Id("call")))...)
	f.Line()
	f.Comment("// all returns a copy of the calls recorded.")
	f.Func().Params(recv.Clone()).Id("all").Params().Index().Id("T").Block(append(lock(),
		jen.Return(jen.Append(jen.Index().Id("T").Parens(jen.Nil()), jen.Id("r").Dot(callsField).Op("..."))))...)
	f.Line()
	f.Comment("// count returns how many calls were recorded.")
	f.Func().Params(recv.Clone()).Id("count").Params().Int().Block(append(lock(),
		jen.Return(jen.Len(jen.Id("r").Dot(callsField))))...)
}

// eventAt writes the functions that send and emit event e at a virtual
// time.
func (r *renderer) eventAt(e *Event) {
	m, f := r.m, r.f
	env := jen.Id("env").Op("*").Qual(stemtestPath, "Env")
	d := jen.Id("d").Qual("time", "Duration")
	ev := jen.Id("ev").Add(r.typ(e.Type))
	// report fails the test with what went wrong, unless the test is over
	// (its context done), when a late event no longer matters.
	report := func(format string, args ...jen.Code) *jen.Statement {
		return jen.If(jen.Err().Op("!=").Nil().Op("&&").Id("env").Dot("Context").Call().Dot("Err").Call().Op("==").Nil()).Block(
			jen.Id("env").Dot("T").Call().Dot("Errorf").Call(append([]jen.Code{jen.Lit(format)}, args...)...))
	}
	f.Line()
	r.doc(fmt.Sprintf("%s sends ev to the run runID with %s.%s when env's virtual clock reads d past now, "+
		"in order with the runs' own timers (at once when d <= 0). A failure fails the test, naming the "+
		"event and the run.", e.sendAtFunc(), m.Name, e.sendFunc()), e.Doc)
	f.Func().Id(e.sendAtFunc()).Params(env.Clone(), d.Clone(), jen.Id("runID").String(), ev.Clone()).Block(
		jen.Id("env").Dot("At").Call(jen.Id("d"), jen.Func().Params().Block(
			jen.Err().Op(":=").Add(r.pkg(e.sendFunc())).Call(jen.Id("env").Dot("Context").Call(), jen.Id("env").Dot("Engine"), jen.Id("runID"), jen.Id("ev")),
			report(fmt.Sprintf("%s: sending event %s (topic %s) to run %%s: %%v", m.helperName(), e.GoName, e.Ann.Topic), jen.Id("runID"), jen.Err()))))
	f.Line()
	r.doc(fmt.Sprintf("%s emits ev, with %s.%s, to every run waiting for %s when env's virtual clock "+
		"reads d past now, in order with the runs' own timers (at once when d <= 0). A failure fails the "+
		"test, naming the event.", e.emitAtFunc(), m.Name, e.emitFunc(), e.GoName), e.Doc)
	f.Func().Id(e.emitAtFunc()).Params(env.Clone(), d.Clone(), ev.Clone()).Block(
		jen.Id("env").Dot("At").Call(jen.Id("d"), jen.Func().Params().Block(
			jen.List(jen.Id("_"), jen.Err()).Op(":=").Add(r.pkg(e.emitFunc())).Call(jen.Id("env").Dot("Context").Call(), jen.Id("env").Dot("Engine"), jen.Id("ev")),
			report(fmt.Sprintf("%s: emitting event %s (topic %s): %%v", m.helperName(), e.GoName, e.Ann.Topic), jen.Err()))))
}

// crashMocks says how a crash test's cases get mocks, when the package
// has them, or "".
func (r *renderer) crashMocks() string {
	steps, _, _ := r.m.helperItems()
	if len(steps) == 0 && len(r.m.mockedWorkflows()) == 0 {
		return ""
	}
	return fmt.Sprintf("; with the option stemtest.Setup, a test puts its mocks (%s) on each case's engine, in "+
		"place of steps, or of the child workflows register leaves out", mockFunc)
}

// crash writes the crash test of workflow w, the newest version of its
// name.
func (r *renderer) crash(w *Workflow) {
	f := r.f
	f.Line()
	r.doc(fmt.Sprintf("%s checks what a durable workflow promises of workflow %s (%s): that its worker may "+
		"die at any step and the run still ends as it would have. It runs the workflow once with in; then, "+
		"for each step, again with the worker killed right after the step's checkpoint is written, and again "+
		"right before, each time letting a fresh engine resume the run. Each case is a subtest that fails "+
		"when the resumed run ends otherwise, checkpoints otherwise (a key missing, added or written twice) "+
		"or gives a step another idempotency key: what a workflow that is not deterministic, or a step that "+
		"is not idempotent, shows after a crash. register registers the workflow on each engine, with the "+
		"child workflows it calls; opts configure every engine (see stemtest.CrashEveryStep)%s.",
		w.crashFunc(), w.GoName, w.Ann.Name, r.crashMocks()), w.Doc)
	f.Func().Id(w.crashFunc()).Params(
		jen.Id("t").Op("*").Qual("testing", "T"),
		jen.Id("register").Func().Params(jen.Id("e").Op("*").Qual(runtimePath, "Engine")).Error(),
		jen.Id("in").Add(r.typ(w.Input().Type)),
		jen.Id("opts").Op("...").Qual(stemtestPath, "Option"),
	).Block(
		jen.Id("t").Dot("Helper").Call(),
		jen.Qual(stemtestPath, "CrashEveryStep").Call(jen.Id("t"), jen.Id("register"), r.pkg(w.nameConst()), jen.Id("in"), jen.Id("opts").Op("...")),
	)
}
