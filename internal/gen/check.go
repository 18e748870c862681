package gen

import (
	"fmt"
	"go/token"
	"slices"

	"github.com/stemflow/stem/annotations"
	"github.com/stemflow/stem/internal/manifest"
)

// check reports every problem of the model that the compiler would not
// catch, or would catch only in generated code: signatures, payload types,
// duplicate durable names, and identifiers the generated code would clash
// with.
func check(m *Package, d *diagnostics) {
	for _, w := range m.Workflows {
		checkWorkflow(w, d)
		checkExportedWorkflow(w, d)
	}
	for _, s := range m.Steps {
		checkStep(m, s, d)
		checkExportedStep(s, d)
	}
	for _, e := range m.Events {
		checkEvent(e, d)
	}
	for _, u := range m.Updates {
		checkUpdate(u, d)
	}
	for _, s := range m.Streams {
		checkStream(s, d)
	}
	checkErrors(m, d)
	checkAttrs(m, d)
	checkDuplicates(m, d)
	checkCollisions(m, d)
	checkLoops(m, d)
	checkTxAsync(m, d)
}

// checkTxAsync reports the calls of a transactional step's future form in
// a workflow: it is not generated, and the compiler would say only that
// the context has no such method.
func checkTxAsync(m *Package, d *diagnostics) {
	steps := map[string]*Step{}
	for _, s := range m.Steps {
		if !s.hasAsync() {
			steps[s.asyncMethod()] = s
		}
	}
	for _, w := range m.Workflows {
		for _, c := range w.Calls {
			if s := steps[c.Method]; s != nil && s.Ann.Name != "" {
				d.add(c.Pos, "step %s (%s) is transactional (tx) and has no future form %s: call %s, which waits for it (the runtime runs a transactional step only as such a call)",
					s.Ann.Key(), s, c.Method, s.method())
			}
		}
	}
}

// checkExportedWorkflow reports an input or output of an exported
// workflow whose type other packages cannot name: they could not call its
// exported function, nor the generated Start function, with it.
func checkExportedWorkflow(w *Workflow, d *diagnostics) {
	if !token.IsExported(w.GoName) || len(w.Params) != 2 || len(w.Results) != 2 || w.Results[1].Role != RoleError {
		return
	}
	what := "workflow " + w.GoName
	fix := fmt.Sprintf("export the type, or unexport the workflow (%s) to keep it to this package", unexported(w.GoName))
	checkExposed(w.Input(), "input "+paramName(w.Input(), 1), what, fmt.Sprintf("call %s or %s with it", w.GoName, w.startFunc()), fix, d)
	checkExposed(w.Output(), "output", what, fmt.Sprintf("use the result of %s or of its runs (%s.Result)", w.GoName, w.runType()), fix, d)
}

// checkExportedStep reports an input or output of an exported step whose
// type other packages cannot name.
func checkExportedStep(s *Step, d *diagnostics) {
	if !token.IsExported(s.GoName) || s.Recv != nil && !token.IsExported(s.Recv.TypeName) {
		return
	}
	if len(s.Params) == 0 || s.Params[0].Role != RoleStepContext && s.Params[0].Role != RoleContext {
		return
	}
	what := "step " + s.String()
	fix := fmt.Sprintf("export the type, or unexport the step (%s) to keep it to this package", unexported(s.GoName))
	for i, p := range s.Inputs() {
		checkExposed(p, "input "+paramName(p, i+1), what, "call "+s.String()+" with it", fix, d)
	}
	if len(s.Results) == 2 && s.Results[1].Role == RoleError {
		checkExposed(s.Results[0], "output", what, "use the result of "+s.String(), fix, d)
	}
}

// checkExposed reports, at its type, a parameter or result of an exported
// function whose type is or holds an unexported type of a package.
func checkExposed(p *Param, what, of, cannot, fix string, d *diagnostics) {
	if p.Role == RoleInvalid || p.Type == nil {
		return
	}
	hidden := hiddenType(p.Type)
	if hidden == "" {
		return
	}
	typ := "the unexported type " + hidden
	if p.Written != hidden {
		typ = fmt.Sprintf("type %s, which holds the unexported type %s", p.Written, hidden)
	}
	d.add(p.Pos, "%s of exported %s has %s: other packages cannot %s; %s", what, of, typ, cannot, fix)
}

// hiddenType returns the name of the first unexported named type t is or
// holds (as an element, key, type argument or field), or "".
func hiddenType(t *Type) string {
	if t == nil {
		return ""
	}
	if t.Kind == KindNamed && t.Path != "" && !token.IsExported(t.Name) {
		return t.Name
	}
	for _, a := range t.Args {
		if h := hiddenType(a); h != "" {
			return h
		}
	}
	if h := hiddenType(t.Key); h != "" {
		return h
	}
	if h := hiddenType(t.Elem); h != "" {
		return h
	}
	for _, f := range t.Fields {
		if h := hiddenType(f.Type); h != "" {
			return h
		}
	}
	return ""
}

// checkLoops reports the calls of a step that is not autoversion in a
// loop of a workflow: the step has one checkpoint key per run, so every
// call after the first fails at run time with runtime.ErrDuplicateStep.
// Sleeps, waits, timers and child calls are not steps: the runtime numbers
// them itself.
func checkLoops(m *Package, d *diagnostics) {
	steps := map[string]*Step{}
	for _, s := range m.Steps {
		steps[s.method()] = s
		if s.hasAsync() {
			steps[s.asyncMethod()] = s
		}
	}
	for _, w := range m.Workflows {
		if w.Ann.Name == "" {
			continue
		}
		for _, c := range w.Calls {
			s := steps[c.Method]
			if !c.InLoop || s == nil || s.Ann.Autoversion || s.Ann.Name == "" {
				continue
			}
			key := s.Ann.Key()
			d.add(c.Pos, "step %s is called in a loop in workflow %s but is not autoversion: each call after the first would fail at run time (ErrDuplicateStep); "+
				"mark the step autoversion (its calls get keys %s#0, #1, …)", key, w.Ann.Name, key)
		}
	}
}

func checkWorkflow(w *Workflow, d *diagnostics) {
	ctx := w.contextType()
	want := fmt.Sprintf("func %s(ctx *%s, in In) (Out, error)", w.GoName, ctx)
	if w.TypeParams.IsValid() {
		d.add(w.TypeParams, "workflow %s must not have type parameters", w.GoName)
	}
	if len(w.Params) != 2 {
		d.add(w.ParamsPos, "workflow %s takes %d parameter(s); want %s", w.GoName, len(w.Params), want)
	} else {
		if p := w.Params[0]; p.StarIdent != ctx {
			d.add(p.Pos, "the first parameter of workflow %s must be *%s (generated), not %s", w.GoName, ctx, p.Written)
		}
		if w.Variadic {
			d.add(w.Params[1].Pos, "workflow %s must not be variadic; want %s", w.GoName, want)
		}
		checkPayload(w.Params[1], "input", "workflow "+w.GoName, d)
	}
	if len(w.Results) != 2 || w.Results[1].Role != RoleError {
		d.add(w.ResultsPos, "workflow %s must return (Out, error); want %s", w.GoName, want)
	} else {
		checkPayload(w.Results[0], "output", "workflow "+w.GoName, d)
	}
	checkProgress(w, d)
}

// checkProgress reports a progress= that does not name a JSON payload
// type the package declares, at the value.
func checkProgress(w *Workflow, d *diagnostics) {
	if w.Progress != nil {
		checkTypeRef(w.Progress, "progress", w.Ann.ValuePos("progress"), "workflow "+w.GoName, d)
	}
}

// checkTypeRef reports a key's value (progress=, reply=) that does not
// name a JSON payload type the package declares, at the value, at; of
// says whose key it is.
func checkTypeRef(p *TypeRef, key string, at token.Pos, of string, d *diagnostics) {
	switch {
	case p.Declared == "":
		msg := fmt.Sprintf("%s=%s: the package declares no type %s", key, p.Name, p.Name)
		if s := annotations.Suggest(p.Name, p.Candidates); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		d.add(at, "%s", msg)
	case p.Declared != "type":
		d.add(at, "%s=%s names a %s, not a type", key, p.Name, p.Declared)
	case p.Generic:
		d.add(at, "%s=%s names a generic type; name a type without type parameters", key, p.Name)
	case p.Problem != "":
		d.add(at, "%s type %s of %s is not a JSON payload: %s", key, p.Name, of, p.Problem)
	}
}

// valid reports whether the type resolved to a JSON payload type.
func (p *TypeRef) valid() bool {
	return p != nil && p.Type != nil && p.Problem == ""
}

func checkStep(m *Package, s *Step, d *diagnostics) {
	if s.TypeParams.IsValid() {
		d.add(s.TypeParams, "step %s must not have type parameters", s)
	}
	if r := s.Recv; r != nil {
		switch {
		case r.Generic:
			d.add(r.Pos, "step %s: the step receiver type %s must not have type parameters", s, r.TypeName)
		case m.Receiver != nil && r.TypeName != m.Receiver.Name:
			d.add(r.Pos, "step %s has receiver type %s, but the package's steps are methods of %s (line %d): step methods share one receiver type, which the application passes at registration",
				s, r.TypeName, m.Receiver.Name, d.fset.Position(m.Receiver.Pos).Line)
		}
	}
	if len(s.Params) == 0 || (s.Params[0].Role != RoleStepContext && s.Params[0].Role != RoleContext && s.Params[0].Role != RoleInvalid) {
		pos := s.ParamsPos
		if len(s.Params) > 0 {
			pos = s.Params[0].Pos
		}
		d.add(pos, "the first parameter of step %s must be runtime.StepContext or context.Context", s)
	} else {
		if s.Variadic {
			last := s.Params[len(s.Params)-1]
			d.add(last.Pos, "step %s must not be variadic: take a slice instead", s)
		}
		checkTxParam(s, d)
		for i, p := range s.Inputs() {
			what := fmt.Sprintf("input %s", paramName(p, i+1))
			if p.Role == RoleTx {
				checkTxInput(s, p, what, i == 0 && !s.Ann.Tx, d)
				continue
			}
			checkPayload(p, what, "step "+s.String(), d)
		}
	}
	switch {
	case len(s.Results) == 1 && s.Results[0].Role == RoleError:
	case len(s.Results) == 2 && s.Results[1].Role == RoleError:
		checkPayload(s.Results[0], "output", "step "+s.String(), d)
	case len(s.Results) > 0 && slices.ContainsFunc(s.Results, func(p *Param) bool { return p.Role == RoleInvalid }):
	default:
		d.add(s.ResultsPos, "step %s must return (T, error) or error", s)
	}
}

// checkTxParam reports a transactional step whose parameter after its
// context is not the store's transaction: at that parameter, at a
// transaction further on, or at the ")" of the parameter list when it has
// none.
func checkTxParam(s *Step, d *diagnostics) {
	if !s.Ann.Tx {
		return
	}
	p := s.TxParam()
	switch {
	case p == nil:
		d.add(s.ParamsEnd, "step %s is transactional (tx) and takes no transaction: add the store's transaction after its context, %s: %s",
			s, txTypes, txWhy)
	case p.Role == RoleInvalid || p.Role == RoleTx:
	default:
		if i := slices.IndexFunc(s.Inputs(), func(p *Param) bool { return p.Role == RoleTx }); i >= 0 {
			later := s.Inputs()[i]
			d.add(later.Pos, "the transaction of step %s (%s) must be its parameter right after the context", s, later.Written)
			return
		}
		d.add(p.Pos, "step %s is transactional (tx): its parameter after the context must be the store's transaction, %s, not %s: %s",
			s, txTypes, notTx(p), txWhy)
	}
}

// checkTxInput reports an input of step s, after its context (and its
// transaction), whose type is a transaction type: a step takes at most
// one transaction, right after its context, and only when marked tx.
// first says whether it is right after the context of a step that is not
// marked tx.
func checkTxInput(s *Step, p *Param, what string, first bool, d *diagnostics) {
	switch {
	case s.Ann.Tx && s.TxParam().Role == RoleTx:
		d.add(p.Pos, "%s of step %s is a second transaction (%s): a transactional step takes one, right after its context", what, s, p.Written)
	case s.Ann.Tx:
		// checkTxParam reports it.
	case first:
		d.add(p.Pos, "%s of step %s is the store's transaction (%s), which only a transactional step takes: mark the step tx (//stem:step ... tx)", what, s, p.Written)
	default:
		d.add(p.Pos, "%s of step %s is the store's transaction (%s), which only a transactional step takes, right after its context: mark the step tx (//stem:step ... tx) and move the parameter there", what, s, p.Written)
	}
}

// notTx names a parameter's type for the message that it is not a
// transaction type, saying what to write instead when it is nearly one.
func notTx(p *Param) string {
	t := p.Type
	switch {
	case t == nil:
	case t.Kind == KindPointer && t.Elem != nil && t.Elem.Kind == KindNamed && t.Elem.Path == pgxPath && t.Elem.Name == "Tx":
		return p.Written + " (pgx.Tx is an interface: take it as it is)"
	case t.Kind == KindNamed && t.Path == sqlPath && t.Name == "Tx":
		return p.Written + " (take a pointer, *sql.Tx)"
	}
	if t != nil && t.Kind == KindPointer {
		t = t.Elem
	}
	if t != nil && t.Kind == KindNamed && t.Name == "Tx" && t.Path != "" && t.Path != pgxPath && t.Path != sqlPath {
		return fmt.Sprintf("%s of %s", p.Written, t.Path)
	}
	return p.Written
}

func paramName(p *Param, i int) string {
	if p.Name == "" || p.Name == "_" {
		return fmt.Sprintf("#%d", i)
	}
	return p.Name
}

// checkPayload reports a parameter or result that cannot be a JSON payload.
func checkPayload(p *Param, what, of string, d *diagnostics) {
	if p.Role == RoleInvalid || p.Problem == "" {
		return
	}
	d.add(p.Pos, "%s of %s is not a JSON payload: %s", what, of, p.Problem)
}

func checkEvent(e *Event, d *diagnostics) {
	if e.TypeParams.IsValid() {
		d.add(e.TypeParams, "event %s must not have type parameters", e.GoName)
	}
	if e.Problem != "" {
		d.add(e.Pos, "event %s is not a JSON payload: %s", e.GoName, e.Problem)
	}
}

// checkUpdate reports an update whose request, reply= or validate= the
// generated code could not use.
func checkUpdate(u *Update, d *diagnostics) {
	if u.TypeParams.IsValid() {
		d.add(u.TypeParams, "update %s must not have type parameters", u.GoName)
	}
	if u.Problem != "" {
		d.add(u.Pos, "update %s is not a JSON payload: %s", u.GoName, u.Problem)
	}
	if u.Reply != nil {
		checkTypeRef(u.Reply, "reply", u.Ann.ValuePos("reply"), "update "+u.GoName, d)
	}
	v := u.Validate
	if v == nil {
		return
	}
	at := u.Ann.ValuePos("validate")
	want := fmt.Sprintf("func(%s) error", u.GoName)
	switch {
	case v.Declared == "":
		msg := fmt.Sprintf("validate=%s: the package declares no function %s; want a %s", v.Name, v.Name, want)
		if s := annotations.Suggest(v.Name, v.Candidates); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		d.add(at, "%s", msg)
	case v.Declared != "function":
		d.add(at, "validate=%s names a %s, not a function; want a %s", v.Name, v.Declared, want)
	case !v.Fits:
		d.add(at, "validate=%s has type %s; a validator of update %s is a %s, which the engine runs on every request before it sends it",
			v.Name, v.Signature, u.GoName, want)
	}
}

// checkStream reports a stream whose values the generated code could not
// write or read.
func checkStream(s *Stream, d *diagnostics) {
	if s.TypeParams.IsValid() {
		d.add(s.TypeParams, "stream %s must not have type parameters", s.GoName)
	}
	if s.Problem != "" {
		d.add(s.Pos, "stream %s is not a JSON payload: %s", s.GoName, s.Problem)
	}
}

// checkDuplicates reports durable names used twice: two workflows with one
// name and version (several versions of one name are allowed, so a build
// keeps an older one registered to drain its runs), two steps with one
// checkpoint key (one name at several versions is allowed, for the same
// reason: an older workflow version calls the step as it was), two events
// with one topic (the runtime decodes a topic's payloads into one type),
// two updates with one name (the runtime registers an update with one
// request and reply type) and two streams with one name (readers decode
// a stream's values into one type).
func checkDuplicates(m *Package, d *diagnostics) {
	type first struct {
		what string
		pos  token.Pos
	}
	seen := map[string]first{}
	dup := func(kind, value, what string, at, decl token.Pos) {
		key := kind + "\x00" + value
		if f, ok := seen[key]; ok {
			hint := ""
			if kind == "step key" {
				hint = "; to keep both, give one another version= (an older workflow version calls the step as it was)"
			}
			d.add(at, "%s %q is already used by %s (line %d)%s", kind, value, f.what, d.fset.Position(f.pos).Line, hint)
			return
		}
		seen[key] = first{what, decl}
	}
	byPos := func(x, y token.Pos) int { return int(x) - int(y) }
	ws := slices.SortedFunc(slices.Values(m.Workflows), func(x, y *Workflow) int { return byPos(x.Pos, y.Pos) })
	for _, w := range ws {
		if w.Ann.Name == "" {
			continue
		}
		key := manifest.Key(w.Ann.Name, w.Ann.Version)
		if f, ok := seen["workflow\x00"+key]; ok {
			at := w.Ann.ValuePos("name")
			if _, ok := w.Ann.Keys["version"]; ok {
				at = w.Ann.ValuePos("version")
			}
			d.add(at, "workflow name %q at version %d is already used by %s (line %d); "+
				"to keep both, give one another version=: the older one then drains the runs started under it",
				w.Ann.Name, w.Ann.Version, f.what, d.fset.Position(f.pos).Line)
			continue
		}
		seen["workflow\x00"+key] = first{"workflow " + w.GoName, w.Pos}
	}
	ss := slices.SortedFunc(slices.Values(m.Steps), func(x, y *Step) int { return byPos(x.Pos, y.Pos) })
	for _, s := range ss {
		if s.Ann.Name != "" {
			dup("step key", s.Ann.Key(), "step "+s.String(), s.Ann.ValuePos("name"), s.Pos)
		}
	}
	es := slices.SortedFunc(slices.Values(m.Events), func(x, y *Event) int { return byPos(x.Pos, y.Pos) })
	for _, e := range es {
		if e.Ann.Topic != "" {
			dup("topic", e.Ann.Topic, "event "+e.GoName, e.Ann.ValuePos("topic"), e.Pos)
		}
	}
	us := slices.SortedFunc(slices.Values(m.Updates), func(x, y *Update) int { return byPos(x.Pos, y.Pos) })
	for _, u := range us {
		if u.Ann.Name != "" {
			dup("update name", u.Ann.Name, "update "+u.GoName, u.Ann.ValuePos("name"), u.Pos)
		}
	}
	sts := slices.SortedFunc(slices.Values(m.Streams), func(x, y *Stream) int { return byPos(x.Pos, y.Pos) })
	for _, s := range sts {
		if s.Ann.Name != "" {
			dup("stream name", s.Ann.Name, "stream "+s.GoName, s.Ann.ValuePos("name"), s.Pos)
		}
	}
}

// checkCollisions reports generated identifiers that clash with the user's
// declarations or with each other: package-level names, and the methods and
// fields of each workflow context.
func checkCollisions(m *Package, d *diagnostics) {
	names := m.packageNames()
	slices.SortStableFunc(names, func(x, y generated) int { return int(x.pos) - int(y.pos) })
	first := map[string]generated{}
	for _, g := range names {
		if pos, ok := m.Declared[g.name]; ok {
			d.add(pos, "%s is generated for %s; rename this declaration (or the annotated one)", g.name, g.what)
			continue
		}
		if f, ok := first[g.name]; ok && f.what != g.what {
			d.add(g.pos, "stemgen would generate %s for both %s and %s; rename one of them", g.name, f.what, g.what)
			continue
		}
		first[g.name] = g
	}
	// The test-helper package declares only generated names, but two
	// annotated declarations may get the same one there.
	helper := m.helperNames()
	slices.SortStableFunc(helper, func(x, y generated) int { return int(x.pos) - int(y.pos) })
	firstHelper := map[string]generated{}
	for _, g := range helper {
		if f, ok := firstHelper[g.name]; ok && f.what != g.what {
			d.add(g.pos, "stemgen would generate %s in package %s (the test helpers) for both %s and %s; rename one of them", g.name, m.helperName(), f.what, g.what)
			continue
		}
		firstHelper[g.name] = g
	}
	// Every workflow context has the same members: two fields, the methods
	// promoted from the embedded *runtime.WorkflowContext, and, by
	// embedding callsType, two more fields and the methods of every step,
	// event and child workflow. The user may add methods to a context or
	// to callsType, but not these.
	type member struct {
		what string
		pos  token.Pos
	}
	common := map[string]member{}
	addCommon := func(name, what string, pos token.Pos) {
		if f, ok := common[name]; ok {
			d.add(pos, "workflow contexts would get %s both as %s and as %s; rename one of them", name, f.what, what)
			return
		}
		common[name] = member{what, pos}
	}
	addCommon(embeddedField, "the embedded *runtime.WorkflowContext", token.NoPos)
	addCommon(stepsField, "the field holding the steps", token.NoPos)
	if m.hasCalls() {
		addCommon(callsType, "the embedded type holding the step, event and child-workflow methods", token.NoPos)
		addCommon(runtimeField, "the field holding the runtime's context for the step, event and child-workflow methods", token.NoPos)
	}
	for _, p := range promoted {
		addCommon(p, "a method of the embedded *runtime.WorkflowContext", token.NoPos)
	}
	// Every context declares ContinueAsNew, typed by its workflow, and one
	// with progress= SetProgress; both names are kept free on every
	// context, so adding progress= to a workflow later breaks nothing.
	addCommon(continueAsNewMethod, "the method continuing the run as new", token.NoPos)
	addCommon(setProgressMethod, "the method publishing the run's progress (with progress=)", token.NoPos)
	addCommon(allMethod, "the method waiting for every one of several futures", token.NoPos)
	addCommon(selectMethod, "the method selecting the first of several futures", token.NoPos)
	addCommon(selectCancelMethod, "the method selecting the first of several futures and cancelling the others", token.NoPos)
	addCommon(detachedMethod, "the method returning the context for the cleanup after a cancellation", token.NoPos)
	for _, s := range m.Steps {
		addCommon(s.method(), "the method of step "+s.String(), s.Pos)
		if s.hasAsync() {
			addCommon(s.asyncMethod(), "the method starting step "+s.String()+" as a future", s.Pos)
		}
	}
	for _, e := range m.Events {
		addCommon(e.awaitMethod(), "the method awaiting event "+e.GoName, e.Pos)
		addCommon(e.onMethod(), "the method returning a future of event "+e.GoName, e.Pos)
	}
	for _, u := range m.Updates {
		addCommon(u.awaitMethod(), "the method awaiting update "+u.GoName, u.Pos)
		addCommon(u.onMethod(), "the method returning a future of update "+u.GoName, u.Pos)
	}
	for _, s := range m.Streams {
		addCommon(s.appendMethod(), "the method appending to stream "+s.GoName, s.Pos)
		addCommon(s.closeMethod(), "the method closing stream "+s.GoName, s.Pos)
	}
	for _, w := range m.Workflows {
		if !w.isNewest() {
			continue // an older version is only registered, never called
		}
		addCommon(w.callMethod(), "the method calling workflow "+w.GoName+" as a child", w.Pos)
		addCommon(w.callAsyncMethod(), "the method calling workflow "+w.GoName+" as a child future", w.Pos)
		addCommon(w.startChildMethod(), "the method starting workflow "+w.GoName+" as a child", w.Pos)
	}
	for _, w := range m.Workflows {
		ctx := w.contextType()
		for _, um := range m.UserMethods[ctx] {
			if f, ok := common[um.Name]; ok {
				d.add(um.Pos, "%s on %s: stemgen generates it as %s; rename this method", um.Name, ctx, f.what)
			}
		}
	}
	// A workflow's attribute setters are its context's own.
	for _, w := range m.Workflows {
		ctx := w.contextType()
		for _, a := range w.Attrs {
			if a.Ann.Name == "" {
				continue
			}
			method := a.setMethod()
			if f, ok := common[method]; ok {
				d.add(a.Ann.ValuePos("name"), "search attribute %s of workflow %s gets the setter %s, which workflow contexts have as %s; rename that one (the attribute's name is durable: another name is another attribute)",
					a.Ann.Name, w.GoName, method, f.what)
			}
			for _, um := range m.UserMethods[ctx] {
				if um.Name == method {
					d.add(um.Pos, "%s on %s: stemgen generates it as the setter of search attribute %s; rename this method", um.Name, ctx, a.Ann.Name)
				}
			}
		}
	}
	if m.hasCalls() {
		for _, um := range m.UserMethods[callsType] {
			if f, ok := common[um.Name]; ok {
				d.add(um.Pos, "%s on %s: stemgen generates it as %s; rename this method", um.Name, callsType, f.what)
			}
		}
	}
	// A user method on a generated type other than a context.
	for _, w := range m.Workflows {
		if !w.isNewest() {
			continue // no run type
		}
		for _, um := range m.UserMethods[w.runType()] {
			switch {
			case slices.Contains([]string{"ID", "Workflow", "Info", "Status", "IdempotencyKey", "Result", "Pause", "Resume", "Terminate", "Restart", "Run"}, um.Name):
				d.add(um.Pos, "%s on %s hides the method of *runtime.Run it embeds; rename it", um.Name, w.runType())
			case w.Progress != nil && slices.Contains([]string{progressMethod, waitProgressMethod, runEngineField}, um.Name):
				d.add(um.Pos, "%s on %s: stemgen generates it for the workflow's progress=; rename this method", um.Name, w.runType())
			}
		}
	}
}
