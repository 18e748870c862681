package gen

import (
	"fmt"
	"go/token"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Every identifier stemgen generates comes from these functions, so check
// (collisions, tolerated type errors) and render agree on them.

// exported returns s with its first letter upper-cased.
func exported(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// unexported returns s with its first letter lower-cased.
func unexported(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

// Package-level names of a workflow. Every version of a workflow gets its
// context, its Register function and its version constant; only the
// newest version of a name gets the others, the client API.
func (w *Workflow) contextType() string  { return exported(w.GoName) + "Context" }
func (w *Workflow) versionConst() string { return exported(w.GoName) + "WorkflowVersion" }
func (w *Workflow) runType() string      { return exported(w.GoName) + "Run" }
func (w *Workflow) registerFunc() string { return "Register" + exported(w.GoName) }
func (w *Workflow) startFunc() string    { return "Start" + exported(w.GoName) }
func (w *Workflow) batchFunc() string    { return "Start" + exported(w.GoName) + "Batch" }
func (w *Workflow) getFunc() string      { return "Get" + exported(w.GoName) }
func (w *Workflow) nameConst() string    { return exported(w.GoName) + "WorkflowName" }
func (w *Workflow) startTxFunc() string  { return "Start" + exported(w.GoName) + "Tx" }

// Package-level names of a step: its checkpoint-key constant, which the
// step's method and everything else that names the key use, and, for an
// autoversion step, the function giving the expanded key of an iteration.
func (s *Step) keyConst() string      { return "Step" + exported(s.GoName) }
func (s *Step) iterationFunc() string { return s.keyConst() + "Iteration" }

// Methods of every workflow context, all declared once, on callsType: a
// step's, an event's await, and a workflow's two child calls (named apart
// from the package-level StartW, which starts a run from outside).
func (s *Step) method() string               { return s.GoName }
func (e *Event) awaitMethod() string         { return "Await" + exported(e.GoName) }
func (w *Workflow) callMethod() string       { return "Call" + exported(w.GoName) }
func (w *Workflow) startChildMethod() string { return "Start" + exported(w.GoName) + "Child" }

// The future-returning forms of those methods, also on callsType: a
// step's and a child call's are the synchronous method's name with
// asyncSuffix; an event's, which has no timeout (select it with a
// timer), reads as what it is, the next such event.
func (s *Step) asyncMethod() string         { return s.method() + asyncSuffix }
func (e *Event) onMethod() string           { return "On" + exported(e.GoName) }
func (w *Workflow) callAsyncMethod() string { return w.callMethod() + asyncSuffix }

const asyncSuffix = "Async"

// hasAsync reports whether step s gets its future form: every step but a
// transactional one, which the runtime runs only as a call that waits
// (runtime.TxStep has no future form).
func (s *Step) hasAsync() bool { return !s.Ann.Tx }

// Methods declared on each workflow's context type itself, typed by the
// workflow: continuing the run as new with its input type, and, for a
// workflow with progress=, publishing its progress type.
const (
	continueAsNewMethod = "ContinueAsNew"
	setProgressMethod   = "SetProgress"
)

// Methods declared on each workflow's context type that wait for futures:
// runtime.All, runtime.Select and runtime.SelectCancel on the run's
// context, so a workflow writes ctx.All(a, b), ctx.Select("first", a, b)
// and ctx.SelectCancel("first", a, b).
const (
	allMethod          = "All"
	selectMethod       = "Select"
	selectCancelMethod = "SelectCancel"
)

// detachedMethod is declared on each workflow's context type: the context
// for the workflow's cleanup after the run's cancellation, of the same
// type (runtime.WorkflowContext.Detached).
const detachedMethod = "Detached"

// Methods of a workflow's run type with progress=, and the field holding
// the engine they read the run's progress from (the embedded *runtime.Run
// does not expose its engine).
const (
	progressMethod     = "Progress"
	waitProgressMethod = "WaitProgress"
	runEngineField     = "engine"
)

// callsType is the unexported type that holds the typed step, event and
// child-workflow methods of a package, declared once whatever the number
// of workflows; every workflow context embeds it, so they are promoted
// methods of each.
const callsType = "stemCalls"

// hasCalls reports whether the package gets a callsType: it has workflow
// contexts, which can at least call the package's workflows as children.
func (m *Package) hasCalls() bool {
	return len(m.Workflows) > 0
}

// Package-level names of an event.
func (e *Event) topicConst() string { return exported(e.GoName) + "Topic" }
func (e *Event) sendFunc() string   { return "Send" + exported(e.GoName) }
func (e *Event) emitFunc() string   { return "Emit" + exported(e.GoName) }
func (e *Event) sendTxFunc() string { return e.sendFunc() + "Tx" }
func (e *Event) emitTxFunc() string { return e.emitFunc() + "Tx" }

// sendOrStartFunc names the function that sends event e to a run of
// workflow w, starting the run if it does not exist (signal-with-start):
// one per event and newest workflow version of the package.
func sendOrStartFunc(e *Event, w *Workflow) string {
	return e.sendFunc() + "OrStart" + exported(w.GoName)
}

// Package-level names of an update: its name constant, the function
// that sends it and waits for the reply, and, per newest workflow version
// of the package, the one that starts the run first when it does not
// exist (update-with-start).
func (u *Update) nameConst() string { return exported(u.GoName) + "Update" }
func (u *Update) callFunc() string  { return "Update" + exported(u.GoName) }

// updateOrStartFunc names the function that sends update u to a run of
// workflow w, starting the run if it does not exist: one per update and
// newest workflow version of the package.
func updateOrStartFunc(u *Update, w *Workflow) string {
	return u.callFunc() + "OrStart" + exported(w.GoName)
}

// Methods of every workflow context that take update u, on callsType, as
// an event's do: one waits, one returns a future.
func (u *Update) awaitMethod() string { return "Await" + exported(u.GoName) }
func (u *Update) onMethod() string    { return "On" + exported(u.GoName) }

// Package-level names of a stream: its name constant, a step's append,
// and the reader's function.
func (s *Stream) nameConst() string        { return exported(s.GoName) + "Stream" }
func (s *Stream) appendInStepFunc() string { return "Append" + exported(s.GoName) + "InStep" }
func (s *Stream) readFunc() string         { return "Stream" + exported(s.GoName) }

// Methods of every workflow context that write stream s, on callsType:
// appending a value, and closing the stream.
func (s *Stream) appendMethod() string { return "Append" + exported(s.GoName) }
func (s *Stream) closeMethod() string  { return "Close" + exported(s.GoName) + "Stream" }

// txStepsVar is the package-level variable holding the package's
// transactional steps with their transaction types, which every
// Register<W> passes to runtime.WorkflowTxSteps. It is declared once, when
// the package has workflows (to pass it) and transactional steps.
const txStepsVar = "stemTxSteps"

// hasTxSteps reports whether the package has a step marked tx.
func (m *Package) hasTxSteps() bool {
	return slices.ContainsFunc(m.Steps, func(s *Step) bool { return s.Ann.Tx })
}

// declaresTxSteps reports whether the package gets txStepsVar.
func (m *Package) declaresTxSteps() bool {
	return len(m.Workflows) > 0 && m.hasTxSteps()
}

// registerAllFunc registers every workflow of the package.
const registerAllFunc = "RegisterWorkflows"

// registerEventsFunc registers the package's event types with an engine,
// for the store's catalog; every Register<W> calls it. It is declared once
// whatever the number of workflows, and only when the package has both
// workflows (to call it) and events.
const registerEventsFunc = "stemRegisterEvents"

// registersEvents reports whether the package gets registerEventsFunc.
func (m *Package) registersEvents() bool {
	return len(m.Workflows) > 0 && len(m.Events) > 0
}

// registerUpdatesFunc registers the package's updates with an engine,
// with their types and validators; every Register<W> calls it. It is
// declared once whatever the number of workflows, and only when the
// package has both workflows (to call it) and updates.
const registerUpdatesFunc = "stemRegisterUpdates"

// registersUpdates reports whether the package gets registerUpdatesFunc.
func (m *Package) registersUpdates() bool {
	return len(m.Workflows) > 0 && len(m.Updates) > 0
}

// Fields of a workflow context: the embedded *runtime.WorkflowContext and
// callsType (named by the type); and of callsType: the run's
// *runtime.WorkflowContext, not embedded, so the runtime's methods reach a
// workflow context along one path only, and the steps' receiver.
const (
	embeddedField = "WorkflowContext"
	runtimeField  = "wc"
	stepsField    = "steps"
)

// promoted are the methods a workflow context gets from the embedded
// *runtime.WorkflowContext.
var promoted = []string{"CancelRequested", "Context", "IsDetached", "Logger", "Now", "ParentID", "Random", "RunID", "Sleep", "SleepUntil", "Timer", "UUID", "Workflow"}

// locals are the identifiers generated code declares inside functions
// (receivers, parameters, variables); import names and parameter names
// avoid them, and a type or annotated function of the package that has
// one of these names is written through an alias (see
// renderer.hiddenTypes). TestLocals checks
// that the list is complete.
var locals = map[string]bool{
	"c": true, "sc": true, "e": true, "ctx": true, "in": true, "opts": true, "r": true,
	"rs": true, "err": true, "out": true, "i": true, "items": true, "ev": true, "steps": true,
	"runID": true, "name": true, "timeout": true, "id": true, "p": true, "after": true,
	overrideLocal: true, "ok": true, guardAliasName: true, "futures": true, "cases": true, "d": true,
	txLocal: true, "req": true, "updateID": true, "v": true, "from": true,
}

// txLocal names the transaction a transactional step's attempt gets, and
// the application's transaction the Tx forms of the client take.
const txLocal = "tx"

// overrideLocal holds, in a step's attempt, the function a test put in
// place of the step's.
const overrideLocal = "fn"

// guardAliasName is the type alias each shape guard declares in its own
// function: the underlying type a payload type had at go generate. The
// compiler names it when the guard stops compiling ("cannot use Order{}
// ... as shapeAtLastGoGenerate value").
const guardAliasName = "shapeAtLastGoGenerate"

// generated is one package-level identifier stemgen declares, and the
// declaration it is for.
type generated struct {
	name string
	pos  token.Pos // of the annotated declaration
	what string
}

// packageNames returns every package-level identifier generated for the
// package, with the annotated declaration each is for.
func (m *Package) packageNames() []generated {
	var out []generated
	add := func(pos token.Pos, what string, names ...string) {
		for _, n := range names {
			out = append(out, generated{n, pos, what})
		}
	}
	for _, w := range m.Workflows {
		what := "workflow " + w.GoName
		add(w.Pos, what, w.contextType(), w.registerFunc(), w.versionConst())
		if w.isNewest() {
			add(w.Pos, what, w.runType(), w.startFunc(), w.startTxFunc(), w.batchFunc(), w.getFunc(), w.nameConst())
		}
	}
	for _, s := range m.Steps {
		add(s.Pos, "step "+s.String(), s.keyConst())
		if s.Ann.Autoversion {
			add(s.Pos, "step "+s.String(), s.iterationFunc())
		}
	}
	for _, e := range m.Events {
		add(e.Pos, "event "+e.GoName, e.topicConst(), e.sendFunc(), e.emitFunc(), e.sendTxFunc(), e.emitTxFunc())
		for _, w := range m.Workflows {
			if w.isNewest() {
				add(e.Pos, fmt.Sprintf("event %s and workflow %s", e.GoName, w.GoName), sendOrStartFunc(e, w))
			}
		}
	}
	for _, u := range m.Updates {
		add(u.Pos, "update "+u.GoName, u.nameConst(), u.callFunc())
		for _, w := range m.Workflows {
			if w.isNewest() {
				add(u.Pos, fmt.Sprintf("update %s with workflow %s", u.GoName, w.GoName), updateOrStartFunc(u, w))
			}
		}
	}
	for _, s := range m.Streams {
		add(s.Pos, "stream "+s.GoName, s.nameConst(), s.appendInStepFunc(), s.readFunc())
	}
	if len(m.Workflows) > 0 {
		add(m.Workflows[0].Pos, "the package's workflows", registerAllFunc)
	}
	if m.hasCalls() {
		add(m.Workflows[0].Pos, "the package's workflow contexts", callsType)
	}
	if m.registersEvents() {
		add(m.Events[0].Pos, "the package's event types", registerEventsFunc)
	}
	if m.registersUpdates() {
		add(m.Updates[0].Pos, "the package's updates", registerUpdatesFunc)
	}
	if m.declaresTxSteps() {
		i := slices.IndexFunc(m.Steps, func(s *Step) bool { return s.Ann.Tx })
		add(m.Steps[i].Pos, "the package's transactional steps", txStepsVar)
	}
	return out
}

// generatedNames is the set of package-level identifiers generated for the
// package.
func (m *Package) generatedNames() map[string]bool {
	set := map[string]bool{}
	for _, g := range m.packageNames() {
		set[g.name] = true
	}
	return set
}

// The test-helper package: stemgen writes it, in a directory of its name
// below the package, for every package with workflows that another
// package can import (not a main package). helperSuffix ends its name:
// ordersstemtest for package orders.
const helperSuffix = "stemtest"

func (m *Package) helperName() string { return m.Name + helperSuffix }
func (m *Package) helperPath() string { return m.Path + "/" + m.helperName() }

// hasHelper reports whether the package gets a test-helper package.
func (m *Package) hasHelper() bool {
	return m.Name != "main" && len(m.Workflows) > 0
}

// Package-level names of the test-helper package: the type holding the
// step mocks and the function returning it, and the generic type that
// records a mock's calls.
const (
	mocksType    = "Mocks"
	mockFunc     = "Mock"
	recorderType = "recorder"
)

// Names a step gets in the test-helper package: the method of mocksType
// that replaces it, the handle that method returns, and the struct of one
// call's inputs.
func (s *Step) mockMethod() string { return exported(s.GoName) }
func (s *Step) mockType() string   { return exported(s.GoName) + "Mock" }
func (s *Step) callType() string   { return exported(s.GoName) + "Call" }

// Names a workflow gets in the test-helper package, as a step does: the
// method of mocksType that mocks it (InvoiceWorkflow, apart from a step
// named Invoice), its handle, and the struct of one call.
func (w *Workflow) mockMethod() string { return exported(w.GoName) + "Workflow" }
func (w *Workflow) mockType() string   { return w.mockMethod() + "Mock" }
func (w *Workflow) callType() string   { return w.mockMethod() + "Call" }

// Methods of a mock handle, and the field holding its calls.
const (
	callsMethod       = "Calls"
	countMethod       = "Count"
	expectCountMethod = "ExpectCount"
	expectCallMethod  = "ExpectCall"
	expectWithMethod  = "ExpectCalledWith"
	callsField        = "calls"
)

// Names an event gets in the test-helper package: sending it, and
// emitting it, at a virtual time.
func (e *Event) sendAtFunc() string { return e.sendFunc() + "At" }
func (e *Event) emitAtFunc() string { return e.emitFunc() + "At" }

// crashFunc is the test-helper package's crash test of a workflow (its
// newest version).
func (w *Workflow) crashFunc() string { return "CrashEveryStep" + exported(w.GoName) }

// helperLocals are the identifiers the test-helper package declares
// inside functions; import names avoid them.
var helperLocals = map[string]bool{
	"m": true, "h": true, "fn": true, "env": true, "d": true, "runID": true, "ev": true,
	"err": true, "t": true, "register": true, "in": true, "opts": true, "r": true, "call": true,
	"T": true, "ctx": true, "n": true, "i": true, "want": true, "c": true, "out": true, txLocal: true,
}

// helperNames returns every package-level identifier of the package's
// test-helper package, with the annotated declaration each is for.
func (m *Package) helperNames() []generated {
	if !m.hasHelper() {
		return nil
	}
	var out []generated
	add := func(pos token.Pos, what string, names ...string) {
		for _, n := range names {
			out = append(out, generated{n, pos, what})
		}
	}
	steps, events, _ := m.helperItems()
	if mocked := m.mockedWorkflows(); len(steps) > 0 || len(mocked) > 0 {
		add(m.mocksPos(), "the package's mocks", mocksType, mockFunc, recorderType)
		for _, w := range mocked {
			add(w.Pos, "workflow "+w.GoName, w.mockType(), w.callType())
		}
	}
	for _, s := range steps {
		add(s.Pos, "step "+s.String(), s.mockType(), s.callType())
	}
	for _, e := range events {
		add(e.Pos, "event "+e.GoName, e.sendAtFunc(), e.emitAtFunc())
	}
	for _, w := range m.crashWorkflows() {
		add(w.Pos, "workflow "+w.GoName, w.crashFunc())
	}
	return out
}

// Methods of a workflow's context type for its search attributes
// (//stem:attr): one setter per attribute, named from the attribute's
// durable name in Go case (see attrGoName).
func (a *Attr) setMethod() string      { return attrSetMethod(a.Ann.Name) }
func attrSetMethod(name string) string { return "Set" + attrGoName(name) + "Attr" }
