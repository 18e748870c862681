package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
)

// This file renders what stemgen generates for updates (//stem:update) and
// streams (//stem:stream), the ways a caller and a run interact beside
// events: the name constants and client functions, the methods of every
// workflow context that take updates and write streams, and the
// registration of the package's updates. It reads only the model, as
// render.go does.

// update writes the name constant of update u and the functions that send
// it and wait for the reply: Update<Req>, and Update<Req>OrStart<W> for
// each newest workflow version of the package.
func (r *renderer) update(u *Update) {
	f := r.f
	f.Line()
	r.doc(fmt.Sprintf("%s is the durable name of update %s, which callers send it by: its request is %s, "+
		"its reply %s.", u.nameConst(), u.GoName, u.GoName, u.Reply.Name), u.Doc)
	f.Const().Id(u.nameConst()).Op("=").Lit(u.Ann.Name)

	f.Line()
	r.doc(fmt.Sprintf("%s sends update %s (%s) with request req to the run runID and waits for the workflow's "+
		"reply (runtime.CallUpdate). %s Give it an ID with runtime.WithUpdateID in opts to call it again after "+
		"a crash without a second handling: it then finds the first update and its reply. A run that has "+
		"ended refuses it with an error matching runtime.ErrUpdateRunEnded, and one that ends without "+
		"replying makes it return runtime.ErrUpdateUnhandled; an error the workflow replies with (Fail) is "+
		"returned as it is, declared errors keeping their identity.",
		u.callFunc(), u.GoName, u.Ann.Name, r.m.checkedDoc(u)), u.Doc)
	f.Func().Id(u.callFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id("runID").String(), jen.Id("req").Add(r.typ(u.Type)), jen.Id("opts").Op("...").Add(rt("UpdateOption"))).
		Params(r.typ(u.Reply.Type), jen.Error()).
		Block(jen.Return(rt("CallUpdate").Types(r.typ(u.Reply.Type)).Call(
			jen.Id("ctx"), jen.Id("e"), jen.Id("runID"), jen.Id(u.nameConst()), jen.Id("req"), jen.Id("opts").Op("..."))))

	for _, w := range r.m.Workflows {
		if w.isNewest() {
			r.updateOrStart(u, w)
		}
	}
}

// checkedDoc says how a request of update u is checked before it is
// sent.
func (m *Package) checkedDoc(u *Update) string {
	if !m.registersUpdates() {
		return fmt.Sprintf("Package %s has no workflow, so no Register function of it registers the update: where "+
			"the engine registers it (runtime.RegisterUpdate), the request is checked against its type and "+
			"validator before anything is written, and elsewhere against the request schema the store's "+
			"catalog records for it.", m.Name)
	}
	if u.Validate == nil {
		return fmt.Sprintf("The request is checked before anything is written: where the engine registers the "+
			"update (the package's Register functions do), against its type, %s.", u.GoName)
	}
	return fmt.Sprintf("The request is checked before anything is written: where the engine registers the "+
		"update (the package's Register functions do), against its type, %s, and its validator, %s, whose "+
		"refusal matches runtime.ErrUpdateRefused and the validator's error.", u.GoName, u.Validate.Name)
}

// updateOrStart writes the function that sends update u to a run of
// workflow w, the newest version of its name, starting the run if it does
// not exist.
func (r *renderer) updateOrStart(u *Update, w *Workflow) {
	f := r.f
	in, out := r.typ(w.Input().Type), r.typ(w.Output().Type)
	f.Line()
	r.doc(fmt.Sprintf("%s sends update %s (%s) with request req to the run id of workflow %s (%s), starting "+
		"that run with input in first if it does not exist (update-with-start), and waits for the reply "+
		"(runtime.UpdateOrStart). The request is checked before anything is written, the start too. The start "+
		"follows the workflow's start policies, as %s does, and runtime.IfExists and runtime.IfEnded in opts "+
		"override them: a run that exists is updated (one that has ended refuses it with an error matching "+
		"runtime.ErrUpdateRunEnded), and a start a policy refuses is runtime.ErrStartRefused with no update "+
		"sent. The start and the update are two writes: updateID (empty: a random one) makes a call made "+
		"again after a crash find the run, and the first update and its reply, as runtime.WithUpdateID does.",
		updateOrStartFunc(u, w), u.GoName, u.Ann.Name, w.GoName, w.Ann.Name, w.startFunc()), "")
	f.Func().Id(updateOrStartFunc(u, w)).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id("id").String(), jen.Id("in").Add(in.Clone()), jen.Id("updateID").String(), jen.Id("req").Add(r.typ(u.Type)),
		jen.Id("opts").Op("...").Add(rt("StartOption"))).
		Params(r.typ(u.Reply.Type), jen.Error()).
		Block(jen.Return(rt("UpdateOrStart").Types(in.Clone(), out.Clone(), r.typ(u.Reply.Type)).Call(
			jen.Id("ctx"), jen.Id("e"), jen.Id(w.nameConst()), jen.Id("id"), jen.Id("in"), jen.Id(u.nameConst()),
			jen.Id("updateID"), jen.Id("req"), jen.Id("opts").Op("..."))))
}

// takeUpdate writes the typed methods on callsType that take update u:
// one waits, one returns a future.
func (r *renderer) takeUpdate(u *Update) {
	f := r.f
	taken := func() *jen.Statement {
		return rt("Update").Types(r.typ(u.Type), r.typ(u.Reply.Type))
	}
	f.Line()
	r.doc(fmt.Sprintf("%s suspends the run until update %s (%s) is sent to it, and returns it: %s's future, "+
		"awaited. name is the wait's durable key within the run. Reply to it with its Reply or Fail, "+
		"which the caller waits for.", u.awaitMethod(), u.GoName, u.Ann.Name, u.onMethod()), u.Doc)
	f.Func().Params(jen.Id("c").Op("*").Id(callsType)).Id(u.awaitMethod()).
		Params(jen.Id("name").String()).
		Params(jen.Op("*").Add(taken()), jen.Error()).
		Block(jen.Return(rt("AwaitUpdate").Types(r.typ(u.Type), r.typ(u.Reply.Type)).Call(
			jen.Id("c").Dot(runtimeField), jen.Id("name"), jen.Id(u.nameConst()))))
	f.Line()
	r.doc(fmt.Sprintf("%s returns a future of the next update %s (%s) sent to this run, without waiting: "+
		"the update is delivered while the run waits on anything, and Await, the context's All or Select "+
		"wait for it. Updates reach the run in the order the store accepted them, each taken by one future; "+
		"one taken by a future that lost a Select is kept for the next future of the update. name is the "+
		"future's durable key within the run, numbered by call order (name#0, name#1, ...), so it may be "+
		"created in a loop. Reply to the update it yields with its Reply or Fail, which the caller waits for.",
		u.onMethod(), u.GoName, u.Ann.Name), u.Doc)
	f.Func().Params(jen.Id("c").Op("*").Id(callsType)).Id(u.onMethod()).
		Params(jen.Id("name").String()).
		Params(jen.Op("*").Add(rt("Future")).Types(jen.Op("*").Add(taken()))).
		Block(jen.Return(rt("OnUpdate").Types(r.typ(u.Type), r.typ(u.Reply.Type)).Call(
			jen.Id("c").Dot(runtimeField), jen.Id("name"), jen.Id(u.nameConst()))))
}

// updateList names a package's updates with their names and validators.
func updateList(updates []*Update) string {
	var list []string
	for _, u := range updates {
		s := fmt.Sprintf("%s on %s", u.GoName, u.Ann.Name)
		if u.Validate != nil {
			s += fmt.Sprintf(" (validated by %s)", u.Validate.Name)
		}
		list = append(list, s)
	}
	return strings.Join(list, ", ")
}

// registerUpdates writes the one function that registers every update of
// the package, which each Register<W> calls.
func (r *renderer) registerUpdates() {
	m := r.m
	if !m.registersUpdates() {
		return
	}
	r.f.Line()
	r.doc(fmt.Sprintf("%s registers the updates of package %s with e, with their request and reply types and "+
		"validators, so the engine checks a request before it sends it, and records them in the store's "+
		"catalog for tools: %s. Every Register function of the package calls it.",
		registerUpdatesFunc, m.Name, updateList(m.Updates)), "")
	r.f.Func().Id(registerUpdatesFunc).Params(jen.Id("e").Op("*").Add(rt("Engine"))).Error().BlockFunc(func(g *jen.Group) {
		for _, u := range m.Updates {
			validate := jen.Nil()
			if u.Validate != nil {
				validate = r.ownFunc(u.Validate.Name)
			}
			g.If(jen.Err().Op(":=").Add(rt("RegisterUpdate")).Types(r.typ(u.Type), r.typ(u.Reply.Type)).
				Call(jen.Id("e"), jen.Id(u.nameConst()), validate), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err()))
		}
		g.Return(jen.Nil())
	})
}

// stream writes the name constant of stream s, the function a step
// appends with, and the function readers read it with.
func (r *renderer) stream(s *Stream) {
	f := r.f
	f.Line()
	r.doc(fmt.Sprintf("%s is the durable name of stream %s, whose values a run appends and readers read in "+
		"order as they are written.", s.nameConst(), s.GoName), s.Doc)
	f.Const().Id(s.nameConst()).Op("=").Lit(s.Ann.Name)

	f.Line()
	r.doc(fmt.Sprintf("%s appends v to the run's stream %s (%s) from a step; sc is the step's context "+
		"(runtime.AppendInStep). The value is written with the step's checkpoint, by the attempt that writes "+
		"it: the values of an attempt that fails are dropped with it, and a step that succeeded is not run, "+
		"nor its values appended, again. Readers see a step's values when its checkpoint is written. A "+
		"transactional step cannot append: its attempt fails for good.", s.appendInStepFunc(), s.GoName, s.Ann.Name), s.Doc)
	f.Func().Id(s.appendInStepFunc()).Params(jen.Id("sc").Add(rt("StepContext")), jen.Id("v").Add(r.typ(s.Type))).Error().Block(
		jen.Return(rt("AppendInStep").Call(jen.Id("sc"), jen.Id(s.nameConst()), jen.Id("v"))))

	f.Line()
	r.doc(fmt.Sprintf("%s returns the values of stream %s (%s) of the run runID from offset from on (0: the "+
		"first), in order, as they are written (runtime.ReadStream): at the end of what is written it waits "+
		"for more, and it ends at the end of a closed stream or of a run that has ended. A value that does "+
		"not decode, an unknown run, or ctx's end is yielded as an error, and the sequence ends; a reader "+
		"resumes from the Offset after the last value it had. Stop early by breaking the loop.",
		s.readFunc(), s.GoName, s.Ann.Name), s.Doc)
	f.Func().Id(s.readFunc()).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("e").Op("*").Add(rt("Engine")),
		jen.Id("runID").String(), jen.Id("from").Int64()).
		Qual("iter", "Seq2").Types(rt("Streamed").Types(r.typ(s.Type)), jen.Error()).
		Block(jen.Return(rt("ReadStream").Types(r.typ(s.Type)).Call(
			jen.Id("ctx"), jen.Id("e"), jen.Id("runID"), jen.Id(s.nameConst()), jen.Id("from"))))
}

// writeStream writes the typed methods on callsType that write stream s:
// appending a value, and closing the stream.
func (r *renderer) writeStream(s *Stream) {
	f := r.f
	f.Line()
	r.doc(fmt.Sprintf("%s appends v to the run's stream %s (%s), durably (runtime.Append): the value is written "+
		"with a checkpoint of the run, keyed by the stream's name and the call's order, so a replay does not "+
		"append it again. Readers (%s) get it in order as it is written, in any process.",
		s.appendMethod(), s.GoName, s.Ann.Name, s.readFunc()), s.Doc)
	f.Func().Params(jen.Id("c").Op("*").Id(callsType)).Id(s.appendMethod()).
		Params(jen.Id("v").Add(r.typ(s.Type))).Error().
		Block(jen.Return(rt("Append").Call(jen.Id("c").Dot(runtimeField), jen.Id(s.nameConst()), jen.Id("v"))))
	f.Line()
	r.doc(fmt.Sprintf("%s closes the run's stream %s (%s), durably, as %s writes (runtime.CloseStream): readers "+
		"that reach its end stop there instead of waiting for more. A later %s opens it again. A stream needs "+
		"no closing: readers also stop at the end of the stream of a run that has ended.",
		s.closeMethod(), s.GoName, s.Ann.Name, s.appendMethod(), s.appendMethod()), s.Doc)
	f.Func().Params(jen.Id("c").Op("*").Id(callsType)).Id(s.closeMethod()).
		Params().Error().
		Block(jen.Return(rt("CloseStream").Call(jen.Id("c").Dot(runtimeField), jen.Id(s.nameConst()))))
}
