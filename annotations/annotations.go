package annotations

import (
	"fmt"
	"go/token"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// Prefix starts every stem directive.
const Prefix = "//stem:"

// Forever is the value of retention= that keeps a workflow's finished runs
// forever.
const Forever = "forever"

// The directive names.
const (
	DirectiveWorkflow = "workflow"
	DirectiveAttr     = "attr"
	DirectiveStep     = "step"
	DirectiveEvent    = "event"
	DirectiveUpdate   = "update"
	DirectiveStream   = "stream"
	DirectiveError    = "error"
	DirectiveAllow    = "allow"
)

// Annotation is one parsed directive: a *Workflow, *Attr, *Step, *Event,
// *Update, *Stream, *ErrorDecl or *Allow.
type Annotation interface {
	// Directive returns the directive's name: DirectiveWorkflow,
	// DirectiveAttr, DirectiveStep, DirectiveEvent, DirectiveUpdate, DirectiveStream,
	// DirectiveError or DirectiveAllow.
	Directive() string
	// Pos returns the position of the directive's "//".
	Pos() token.Pos
	// KeyPos returns the position of the argument with the given key, or
	// the directive's position when the argument is absent.
	KeyPos(key string) token.Pos
	// String returns the directive in canonical form. Parsing it gives an
	// equal annotation, positions aside.
	String() string
}

// Positions records where a directive and each of its arguments begin, so
// that later checks can report errors at the exact token.
type Positions struct {
	// Slash is the position of the directive's "//".
	Slash token.Pos
	// Keys maps each argument's key to the position of its first character.
	Keys map[string]token.Pos
}

// Pos returns the position of the directive's "//".
func (p Positions) Pos() token.Pos { return p.Slash }

// KeyPos returns the position of the argument with key, or of the directive
// when the argument is absent.
func (p Positions) KeyPos(key string) token.Pos {
	if pos, ok := p.Keys[key]; ok {
		return pos
	}
	return p.Slash
}

// ValuePos returns the position of the value of the argument with key (just
// after its "="), or of the directive when the argument is absent.
func (p Positions) ValuePos(key string) token.Pos {
	if pos, ok := p.Keys[key]; ok {
		return pos + token.Pos(len(key)+1)
	}
	return p.Slash
}

// Workflow is //stem:workflow name=<name> [version=<n>] [timeout=<d>]
// [progress=<Type>] [queue=<queue>] [retention=<d>|forever]
// [existing=<policy>] [ended=<policy>]. It marks
//
//	func Name(ctx *NameContext, in In) (Out, error)
//
// as a workflow registered under the durable Name.
type Workflow struct {
	// Name is the durable workflow name stored with every run (name=,
	// required).
	Name string
	// Version acknowledges a change of the workflow's input, output or
	// progress type shape recorded in the package's manifest (version=,
	// default 1). It is not stored with runs.
	Version int
	// Timeout gives every run of the workflow a deadline Timeout after its
	// start, unless the start sets one (timeout=, default: none).
	Timeout time.Duration
	// Progress names the type, declared in the same package, of the
	// progress the workflow's runs publish (progress=, default: none). The
	// parser checks only that it is a Go identifier; the generator checks
	// that the package declares it.
	Progress string
	// Queue is the workflow's default queue: its runs are started there
	// unless a start names another (queue=, default: none, which is the
	// engine's default queue). Not a shape: changing it needs no version
	// bump.
	Queue string
	// Retention is how long the workflow's finished runs are kept,
	// overriding the engine's default (retention=<d>, default: none). Not
	// a shape, like Queue.
	Retention time.Duration
	// RetainForever keeps the workflow's finished runs forever
	// (retention=forever). Retention is then 0.
	RetainForever bool
	// Existing is what a start of an ID whose run exists and has not
	// ended does, as written (existing=): ExistingReturn, ExistingFail or
	// ExistingReplace; "" when absent, which is ExistingReturn. A start's
	// runtime.IfExists overrides it. Not a shape, like Queue.
	Existing string
	// Ended is what a start of an ID whose run has ended does, as written
	// (ended=): EndedReturn, EndedReuse, EndedReject or EndedReuseFailed;
	// "" when absent, which is EndedReturn. A start's runtime.IfEnded
	// overrides it. Not a shape, like Queue.
	Ended string
	Positions
}

// The values of existing=, what a start of an ID whose run exists and has
// not ended does (runtime.ExistingReturn, ExistingFail, ExistingReplace).
const (
	ExistingReturn  = "return"  // return the existing run, writing nothing
	ExistingFail    = "fail"    // fail with runtime.ErrStartRefused
	ExistingReplace = "replace" // terminate it and start the new run in its place
)

// ExistingPolicies lists the values existing= accepts, in the order
// messages name them.
var ExistingPolicies = []string{ExistingReturn, ExistingFail, ExistingReplace}

// The values of ended=, what a start of an ID whose run has ended does
// (runtime.EndedReturn, EndedReuse, EndedReject, EndedReuseFailed).
const (
	EndedReturn      = "return"       // return the ended run, writing nothing
	EndedReuse       = "reuse"        // start a new run in its place
	EndedReject      = "reject"       // fail with runtime.ErrStartRefused
	EndedReuseFailed = "reuse-failed" // reuse if it errored or was terminated, else reject
)

// EndedPolicies lists the values ended= accepts, in the order messages
// name them.
var EndedPolicies = []string{EndedReturn, EndedReuse, EndedReject, EndedReuseFailed}

// Directive returns DirectiveWorkflow.
func (*Workflow) Directive() string { return DirectiveWorkflow }

// String returns the directive in canonical form.
func (w *Workflow) String() string {
	var b strings.Builder
	b.WriteString(Prefix + DirectiveWorkflow)
	fmt.Fprintf(&b, " name=%s", w.Name)
	if w.Version != 1 {
		fmt.Fprintf(&b, " version=%d", w.Version)
	}
	if w.Timeout != 0 {
		fmt.Fprintf(&b, " timeout=%s", w.Timeout)
	}
	if w.Progress != "" {
		fmt.Fprintf(&b, " progress=%s", w.Progress)
	}
	if w.Queue != "" {
		fmt.Fprintf(&b, " queue=%s", w.Queue)
	}
	switch {
	case w.RetainForever:
		b.WriteString(" retention=" + Forever)
	case w.Retention != 0:
		fmt.Fprintf(&b, " retention=%s", w.Retention)
	}
	if w.Existing != "" {
		b.WriteString(" existing=" + w.Existing)
	}
	if w.Ended != "" {
		b.WriteString(" ended=" + w.Ended)
	}
	return b.String()
}

// Attr is //stem:attr name=<name> [type=<type>] [from=<field path>]. It
// follows a workflow's //stem:workflow, once per search attribute the
// workflow declares: a typed, named value stored with each of its runs
// that listings filter on (runtime.ListRunsQuery.Where, stem runs
// --where).
type Attr struct {
	// Name is the attribute's durable name (name=, required): what filters
	// and the store use, 1 to storage.MaxAttrName ASCII letters, digits,
	// '.', '_' and '-'.
	Name string
	// Type is the attribute's type as written (type=): storage.AttrString,
	// AttrNumber, AttrTime or AttrBool; "" when absent, which needs From,
	// whose field's type then gives it. The generator checks that a Type
	// written beside From agrees with the field.
	Type storage.AttrType
	// From is the Go path of the field of the workflow's input the
	// attribute is taken from at each run's start (from=, "Customer.ID"),
	// or "" for an attribute the workflow sets as it goes. The parser
	// checks only that it is a path of Go identifiers; the generator
	// resolves it.
	From string
	Positions
}

// Directive returns DirectiveAttr.
func (*Attr) Directive() string { return DirectiveAttr }

// String returns the directive in canonical form.
func (a *Attr) String() string {
	var b strings.Builder
	b.WriteString(Prefix + DirectiveAttr)
	fmt.Fprintf(&b, " name=%s", a.Name)
	if a.Type != "" {
		fmt.Fprintf(&b, " type=%s", a.Type)
	}
	if a.From != "" {
		fmt.Fprintf(&b, " from=%s", a.From)
	}
	return b.String()
}

// RetryForever is Step.Retries for retries=forever: a failed attempt is
// retried until one succeeds (runtime.RetryForever).
const RetryForever = -1

// NoJitter is Step.Jitter for jitter=0: retries wait their exact backoff
// delays (runtime.NoJitter).
const NoJitter = -1.0

// Step is //stem:step name=<name> [version=<n>] [retries=<n>|forever]
// [backoff=<d>[..<max>]] [jitter=<f>] [timeout=<d>] [autoversion] [tx].
// It marks a method of the package's step receiver, or a plain function,
// as a checkpointed step.
type Step struct {
	// Name is the durable step name (name=, required).
	Name string
	// Version is the checkpoint key's version (version=, default 1).
	Version int
	// Retries is how many times a failed attempt is retried (retries=,
	// default 0); RetryForever for retries=forever.
	Retries int
	// Backoff is the delay before the first retry (backoff=, default: the
	// runtime's).
	Backoff time.Duration
	// MaxBackoff caps the retry delay (the part after ".." of backoff=,
	// default: the runtime's).
	MaxBackoff time.Duration
	// Jitter is the fraction of each retry delay that is randomized
	// (jitter=, 0 to 1; default: the runtime's, 0.5); NoJitter for
	// jitter=0.
	Jitter float64
	// Timeout bounds each attempt (timeout=, default: none).
	Timeout time.Duration
	// Autoversion lets the step run many times in one run (autoversion).
	Autoversion bool
	// Tx makes the step transactional (tx): its function takes the
	// store's transaction after its context (pgx.Tx or *sql.Tx), and its
	// writes there commit with its checkpoint. The parser checks nothing
	// else; the generator checks the parameter.
	Tx bool
	Positions
}

// Directive returns DirectiveStep.
func (*Step) Directive() string { return DirectiveStep }

// Key returns the step's checkpoint key, "name@vN". Autoversion calls add
// "#i" at run time.
func (s *Step) Key() string { return fmt.Sprintf("%s@v%d", s.Name, s.Version) }

// String returns the directive in canonical form.
func (s *Step) String() string {
	var b strings.Builder
	b.WriteString(Prefix + DirectiveStep)
	fmt.Fprintf(&b, " name=%s", s.Name)
	if s.Version != 1 {
		fmt.Fprintf(&b, " version=%d", s.Version)
	}
	switch {
	case s.Retries == RetryForever:
		b.WriteString(" retries=forever")
	case s.Retries != 0:
		fmt.Fprintf(&b, " retries=%d", s.Retries)
	}
	if s.Backoff != 0 {
		fmt.Fprintf(&b, " backoff=%s", s.Backoff)
		if s.MaxBackoff != 0 {
			fmt.Fprintf(&b, "..%s", s.MaxBackoff)
		}
	}
	switch {
	case s.Jitter == NoJitter:
		b.WriteString(" jitter=0")
	case s.Jitter != 0:
		fmt.Fprintf(&b, " jitter=%s", strconv.FormatFloat(s.Jitter, 'f', -1, 64))
	}
	if s.Timeout != 0 {
		fmt.Fprintf(&b, " timeout=%s", s.Timeout)
	}
	if s.Autoversion {
		b.WriteString(" autoversion")
	}
	if s.Tx {
		b.WriteString(" tx")
	}
	return b.String()
}

// Event is //stem:event topic=<topic> [version=<n>]. It marks a type as the
// payload of a typed event on Topic.
type Event struct {
	// Topic is the event topic (topic=, required).
	Topic string
	// Version acknowledges a change of the payload's shape recorded in the
	// package's manifest (version=, default 1): runs waiting on the topic,
	// or holding a delivered payload, would decode the old shape into the
	// new type, so a changed shape needs a new topic or a bump, after
	// `stem check` shows no run in flight holds one.
	Version int
	Positions
}

// Directive returns DirectiveEvent.
func (*Event) Directive() string { return DirectiveEvent }

// Key returns the event's manifest key, "topic@vN".
func (e *Event) Key() string { return fmt.Sprintf("%s@v%d", e.Topic, e.Version) }

// String returns the directive in canonical form.
func (e *Event) String() string {
	s := fmt.Sprintf("%s%s topic=%s", Prefix, DirectiveEvent, e.Topic)
	if e.Version != 1 {
		s += fmt.Sprintf(" version=%d", e.Version)
	}
	return s
}

// Update is //stem:update name=<name> reply=<Type> [validate=<Func>]
// [version=<n>]. It marks a type as the request of an update: a caller
// sends the request to a run, which takes it where it chooses and replies
// with a Reply.
type Update struct {
	// Name is the update's durable name, which callers send it by (name=,
	// required).
	Name string
	// Reply names the type, declared in the same package, of the reply the
	// workflow sends back (reply=, required). The parser checks only that
	// it is a Go identifier; the generator checks that the package
	// declares it.
	Reply string
	// Validate names a function declared in the same package,
	// func(<request type>) error, that the engine runs on every request
	// before anything is written, refusing the update when it returns an
	// error (validate=, default: none). The parser checks only that it is
	// a Go identifier; the generator checks the function.
	Validate string
	// Version acknowledges a change of the request's or the reply's shape
	// recorded in the package's manifest (version=, default 1): a run
	// holding a request it has not taken yet, or a caller reading a
	// stored reply, would decode the old shape into the new type. It is
	// not stored with runs.
	Version int
	Positions
}

// Directive returns DirectiveUpdate.
func (*Update) Directive() string { return DirectiveUpdate }

// Key returns the update's manifest key, "name@vN".
func (u *Update) Key() string { return fmt.Sprintf("%s@v%d", u.Name, u.Version) }

// String returns the directive in canonical form.
func (u *Update) String() string {
	var b strings.Builder
	b.WriteString(Prefix + DirectiveUpdate)
	fmt.Fprintf(&b, " name=%s reply=%s", u.Name, u.Reply)
	if u.Validate != "" {
		fmt.Fprintf(&b, " validate=%s", u.Validate)
	}
	if u.Version != 1 {
		fmt.Fprintf(&b, " version=%d", u.Version)
	}
	return b.String()
}

// Stream is //stem:stream name=<name> [version=<n>]. It marks a type as
// the value of a stream: a run appends values to its stream of the name,
// and readers read them in order as they are written.
type Stream struct {
	// Name is the stream's durable name (name=, required).
	Name string
	// Version acknowledges a change of the value's shape recorded in the
	// package's manifest (version=, default 1): readers decode the values
	// stored in the streams of every run still kept into the type. It is
	// not stored with runs.
	Version int
	Positions
}

// Directive returns DirectiveStream.
func (*Stream) Directive() string { return DirectiveStream }

// Key returns the stream's manifest key, "name@vN".
func (s *Stream) Key() string { return fmt.Sprintf("%s@v%d", s.Name, s.Version) }

// String returns the directive in canonical form.
func (s *Stream) String() string {
	out := fmt.Sprintf("%s%s name=%s", Prefix, DirectiveStream, s.Name)
	if s.Version != 1 {
		out += fmt.Sprintf(" version=%d", s.Version)
	}
	return out
}

// ErrorDecl is //stem:error name=<name>. It declares an error under the
// durable Name: on a variable (or constant) the error value, matched with
// errors.Is; on a type the error type, matched with errors.As, its
// exported fields recorded with the failure. A failure whose chain holds
// it keeps that identity through the store: in the workflow, from Result,
// in another process and after a replay.
type ErrorDecl struct {
	// Name is the durable name recorded with failures (name=, required).
	Name string
	Positions
}

// Directive returns DirectiveError.
func (*ErrorDecl) Directive() string { return DirectiveError }

// String returns the directive in canonical form.
func (e *ErrorDecl) String() string {
	return fmt.Sprintf("%s%s name=%s", Prefix, DirectiveError, e.Name)
}

// The kinds of nondeterminism the determinism analyzer reports, which a
// //stem:allow line comment names to allow one deliberately.
const (
	AllowTime      = "time"      // the wall clock: time.Now, time.Since, timers
	AllowRand      = "rand"      // math/rand, crypto/rand
	AllowGoroutine = "goroutine" // go statements
	AllowSelect    = "select"    // select statements and channel operations
	AllowMap       = "map"       // ranging over a map
	AllowIO        = "io"        // files, network, environment, processes
	AllowGlobal    = "global"    // writes to package variables
)

// AllowKinds lists the kinds //stem:allow accepts, in the order messages
// name them.
var AllowKinds = []string{AllowTime, AllowRand, AllowGoroutine, AllowSelect, AllowMap, AllowIO, AllowGlobal}

// Allow is //stem:allow <kind>..., a line comment inside workflow code
// that allows the named kinds of nondeterminism (AllowKinds) on its own
// line, or on the next line when it stands alone on its line: a
// deliberate exception the determinism analyzer then does not report.
// Say why in an ordinary comment beside it.
type Allow struct {
	// Kinds are the kinds allowed, in the order written.
	Kinds []string
	Positions
}

// Directive returns DirectiveAllow.
func (*Allow) Directive() string { return DirectiveAllow }

// Allows reports whether the comment allows kind.
func (a *Allow) Allows(kind string) bool {
	for _, k := range a.Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// String returns the directive in canonical form.
func (a *Allow) String() string {
	return Prefix + DirectiveAllow + " " + strings.Join(a.Kinds, " ")
}

// Error is a malformed directive, positioned at the offending token.
type Error struct {
	Pos token.Pos
	Msg string
}

// Error returns the message, without the position.
func (e *Error) Error() string { return e.Msg }

// ErrorList is every error found in one directive, in position order.
type ErrorList []*Error

// Error returns the first message and how many more there are.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Msg
	}
	return fmt.Sprintf("%s (and %d more errors)", l[0].Msg, len(l)-1)
}
