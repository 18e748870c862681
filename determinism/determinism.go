// Package determinism is Stem's determinism analyzer: it reports, inside
// workflow functions (those annotated //stem:workflow) and the code of the
// same package they call, what makes a replay diverge from the run it
// replays — the wall clock, randomness, goroutines, selects and channel
// operations, map iteration, I/O and writes to package variables — each
// with its position and the fix. A //stem:allow line comment allows a
// deliberate exception.
//
// It runs as a go vet tool (cmd/stemvet) and inside stemgen, which
// reports its findings with its other diagnostics.
//
// # Which code
//
// Workflow code is the body of every function whose doc comment holds a
// //stem:workflow directive, and, transitively, the bodies of the
// functions and methods of the same package it calls or refers to by
// name. Function literals inside it are workflow code too, except those
// that run as steps: a literal passed to runtime.Step, runtime.Do,
// runtime.StepAsync or runtime.DoAsync (and a function passed to them by
// name), and any literal whose first parameter is a runtime.StepContext. Functions annotated //stem:step run
// as steps and are not workflow code, and neither is generated code (a
// file starting with "// Code generated ... DO NOT EDIT.", such as
// stem_gen.go): the context's own methods (Sleep, the typed steps and
// events) are what workflow code should call. Code of other packages is
// not inspected.
//
// A finding in a function the workflow calls is reported at that
// function's construct, naming the workflow and the calls that reach it:
// "time.Now reached from workflow orders.fulfil via stamp(): ...". When
// several workflows reach it, it is reported once, for the workflow with
// the shortest chain of calls to it (the first in source order among
// equals).
//
// # What it reports
//
// Each finding has a kind, the word a //stem:allow comment names:
//
//   - time: time.Now, Since, Until (a replay reads another time), Sleep,
//     After, Tick, NewTimer, NewTicker, AfterFunc (a wait that is not
//     recorded); any other package's clock: a function or method (of a
//     type or an interface, such as a clock library's) named Now that
//     takes nothing and returns a time.Time; and context.WithTimeout,
//     WithDeadline and their Cause forms (a deadline set from the clock).
//     Use the context's Now, which records the time at the call, its
//     Sleep, SleepUntil or Timer, a step's timeout, or runtime.WithTimeout
//     for the whole run.
//   - rand: the functions of math/rand and math/rand/v2 (but the
//     constructors New, NewSource, NewPCG, NewChaCha8, NewZipf) and the
//     methods of their sources, crypto/rand, and the New* functions of
//     github.com/google/uuid (matched by import path). Use the context's
//     Random or UUID, which record what they drew, runtime.SideEffect, or
//     a step; a source seeded from the workflow's input is deterministic
//     and can be allowed.
//   - goroutine: go statements. Start steps concurrently with the
//     context's Async step methods (runtime.StepAsync) and futures.
//   - select: select statements, channel sends and receives, and ranging
//     over a channel. Use the context's Select (runtime.Select) over futures
//     and events.
//   - map: ranging over a map (or over maps.Keys, maps.Values, maps.All),
//     since Go randomizes the order — unless
//     the loop's body cannot depend on it: every statement only adds
//     integers (x += v, n++, counts[k]++), writes the entry of another map
//     keyed by the loop's key (or a constant, as a set), deletes the key,
//     appends to slices that are sorted by the statements right after the
//     loop (sort.Strings, slices.Sort, ...), or is an if or continue around
//     those, and no statement reads what another writes. Floating-point
//     sums depend on order and are reported. Range over
//     slices.Sorted(maps.Keys(m)) instead.
//   - io: calls into os, os/exec, os/signal, os/user, net, net/http,
//     net/rpc, net/smtp, database/sql, io/ioutil and syscall (but their
//     pure helpers: os.IsNotExist and the like, net.ParseIP and the
//     methods of net.IP, http.StatusText, http.NewRequest and the methods
//     of http.Header, sql.Named, and every Error, Unwrap, String, Timeout
//     and Temporary method), the file system functions of path/filepath
//     (Abs, EvalSymlinks, Glob, Walk, WalkDir), and reading os.Args or
//     os.Stdin. Printing (fmt.Print*, log.*, writing to os.Stdout or
//     os.Stderr) is not reported: it repeats on every replay, like
//     logging, but does not change what the workflow does; log with the
//     context's Logger.
//   - global: writes to package variables — assignment, ++ and --, taking
//     their address, calling a pointer method on one — since they are
//     shared by every run in the process and outlive a replay.
//
// Calls are resolved with type information, never by spelling; what
// cannot be resolved (a package whose generated code is missing, as
// before the first generation) is not reported.
//
// # Exceptions
//
// A //stem:allow <kind>... line comment allows the kinds it names on its
// own line, or, alone on its line, on the next line:
//
//	// Only logged: nothing the workflow does depends on it.
//	ctx.Logger().Info("resumed", "at", time.Now()) //stem:allow time
//
// An allow comment inside a function body that allows nothing is itself
// reported, so exceptions do not outlive their reason: also one in code no
// workflow reaches, or in a step. Malformed allow
// comments are stemgen's to report.
package determinism

import (
	"cmp"
	"go/ast"
	"go/token"
	"go/types"
	"slices"

	"golang.org/x/tools/go/analysis"

	"github.com/stemflow/stem/annotations"
)

// Analyzer is the determinism analyzer for go/analysis drivers.
var Analyzer = &analysis.Analyzer{
	Name: "stemdeterminism",
	Doc:  "report what makes Stem workflow code nondeterministic on replay",
	URL:  "https://pkg.go.dev/github.com/stemflow/stem/determinism",
	// Inspect tolerates the type errors of a package whose generated
	// code is missing or stale, so drivers that allow it (editors) report
	// before the first go generate.
	RunDespiteErrors: true,
	Run: func(pass *analysis.Pass) (any, error) {
		for _, f := range Inspect(pass.Fset, pass.Files, pass.Pkg, pass.TypesInfo) {
			pass.Report(analysis.Diagnostic{Pos: f.Pos, Category: f.Kind, Message: f.Message})
		}
		return nil, nil
	},
}

// Finding is one nondeterministic construct in workflow code, or a
// //stem:allow comment that allows nothing.
type Finding struct {
	// Pos is where it is.
	Pos token.Pos
	// Kind is its kind, one of annotations.AllowKinds: what a //stem:allow
	// comment names to allow it.
	Kind string
	// Message says what it is, why replay diverges on it and the fix.
	Message string
}

// Inspect returns the findings in files, a package's syntax with its type
// information, in position order. It tolerates incomplete type
// information (a package whose generated code is missing or stale):
// what it cannot resolve it does not report.
func Inspect(fset *token.FileSet, files []*ast.File, pkg *types.Package, info *types.Info) []Finding {
	if info == nil {
		info = &types.Info{}
	}
	a := &inspector{
		fset:  fset,
		pkg:   pkg,
		info:  info,
		decls: map[*types.Func]*ast.FuncDecl{},
		steps: map[*ast.FuncDecl]bool{},
		seen:  map[seenKey]bool{},
		allow: newAllows(fset, info),
	}
	var roots []root
	for _, f := range files {
		a.allow.file(f)
		if ast.IsGenerated(f) {
			continue
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fn, ok := info.Defs[fd.Name].(*types.Func); ok {
				a.decls[fn] = fd
			}
			switch ann := annotation(fd.Doc).(type) {
			case *annotations.Workflow:
				if fd.Body != nil {
					name := ann.Name
					if name == "" {
						name = fd.Name.Name
					}
					roots = append(roots, root{fd, name})
				}
			case *annotations.Step:
				a.steps[fd] = true
			}
		}
	}
	slices.SortFunc(roots, func(x, y root) int { return cmp.Compare(x.decl.Pos(), y.decl.Pos()) })
	a.run(roots)
	a.findings = append(a.findings, a.allow.unused(a.inWorkflowCode)...)
	slices.SortStableFunc(a.findings, func(x, y Finding) int { return cmp.Compare(x.Pos, y.Pos) })
	return a.findings
}

// annotation returns the first workflow or step directive of a doc
// comment, or nil.
func annotation(doc *ast.CommentGroup) annotations.Annotation {
	if doc == nil {
		return nil
	}
	for _, c := range doc.List {
		if !annotations.IsDirective(c.Text) {
			continue
		}
		switch a, _ := annotations.ParseComment(c); a.(type) {
		case *annotations.Workflow, *annotations.Step:
			return a
		}
	}
	return nil
}

// root is a workflow function.
type root struct {
	decl *ast.FuncDecl
	name string // the durable workflow name
}

// seenKey identifies a finding, so that code reached from several
// workflows is reported once.
type seenKey struct {
	pos  token.Pos
	kind string
}

// inspector is one run of Inspect.
type inspector struct {
	fset *token.FileSet
	pkg  *types.Package
	info *types.Info
	// decls are the package's function declarations outside generated
	// files, by their object.
	decls map[*types.Func]*ast.FuncDecl
	// steps are the declarations annotated //stem:step.
	steps    map[*ast.FuncDecl]bool
	allow    *allows
	seen     map[seenKey]bool
	findings []Finding
	// workflowCode holds the function bodies reached from a workflow,
	// stepCode the literals in them that run as steps.
	workflowCode, stepCode spans
}

// inWorkflowCode reports whether pos is in the code inspected.
func (a *inspector) inWorkflowCode(pos token.Pos) bool {
	return a.workflowCode.contains(pos) && !a.stepCode.contains(pos)
}

// origin says how workflow code was reached: from which workflow, through
// which calls.
type origin struct {
	workflow string
	via      []string
}

// run inspects the workflows' bodies and, breadth first, the functions
// they reach, each once.
func (a *inspector) run(roots []root) {
	type item struct {
		decl *ast.FuncDecl
		o    origin
	}
	var queue []item
	visited := map[*ast.FuncDecl]bool{}
	for _, r := range roots {
		visited[r.decl] = true
		queue = append(queue, item{r.decl, origin{workflow: r.name}})
	}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		for _, callee := range a.body(it.decl.Body, it.o) {
			if visited[callee] {
				continue
			}
			visited[callee] = true
			via := append(slices.Clip(it.o.via), declName(callee)+"()")
			queue = append(queue, item{callee, origin{workflow: it.o.workflow, via: via}})
		}
	}
}

// declName names a declared function for messages: F, or T.M for a
// method.
func declName(fd *ast.FuncDecl) string {
	if fd.Recv != nil && len(fd.Recv.List) == 1 {
		t := fd.Recv.List[0].Type
		for {
			switch x := t.(type) {
			case *ast.StarExpr:
				t = x.X
				continue
			case *ast.IndexExpr:
				t = x.X
				continue
			case *ast.IndexListExpr:
				t = x.X
				continue
			case *ast.ParenExpr:
				t = x.X
				continue
			}
			break
		}
		if id, ok := t.(*ast.Ident); ok {
			return id.Name + "." + fd.Name.Name
		}
	}
	return fd.Name.Name
}

// report records a finding at pos unless a //stem:allow comment allows
// its kind there or it was reported already.
func (a *inspector) report(pos token.Pos, kind string, o origin, what, why, fix string) {
	if a.allow.allows(pos, kind) {
		return
	}
	k := seenKey{pos, kind}
	if a.seen[k] {
		return
	}
	a.seen[k] = true
	where := "in workflow " + o.workflow
	if len(o.via) > 0 {
		where = "reached from workflow " + o.workflow + " via " + joinVia(o.via)
	}
	a.findings = append(a.findings, Finding{Pos: pos, Kind: kind, Message: what + " " + where + ": " + why + "; " + fix})
}

func joinVia(via []string) string {
	s := via[0]
	for _, v := range via[1:] {
		s += " → " + v
	}
	return s
}

// spans are ranges of positions.
type spans []span

type span struct{ from, to token.Pos }

// contains reports whether pos is in one of the spans.
func (s spans) contains(pos token.Pos) bool {
	for _, sp := range s {
		if sp.from <= pos && pos < sp.to {
			return true
		}
	}
	return false
}
