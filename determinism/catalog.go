package determinism

import (
	"go/types"
	"strings"

	"github.com/stemflow/stem/annotations"
)

// rule is what a nondeterministic function or variable is reported as.
type rule struct {
	kind, why, fix string
}

var (
	clockRule = &rule{annotations.AllowTime,
		"a replay reads another time than the run did",
		"use the context's Now (ctx.Now()), which records the time at the call, or wait with the context's Sleep/SleepUntil"}
	sleepRule = &rule{annotations.AllowTime,
		"the wait is not recorded, so it holds the worker and a replay waits again",
		"use the context's Sleep or SleepUntil, which suspend the run durably"}
	timerRule = &rule{annotations.AllowTime,
		"the timer is not recorded, so a replay waits again and fires at another moment",
		"use the context's Sleep, SleepUntil or Timer"}
	randRule = &rule{annotations.AllowRand,
		"a replay draws other numbers than the run did",
		"use the context's Random (ctx.Random()), which records the number, or draw them in a step and use its result"}
	sourceRule = &rule{annotations.AllowRand,
		"a replay draws other numbers than the run did, unless the source was seeded from the workflow's input",
		"use the context's Random (ctx.Random()), draw them in a step, or //stem:allow rand where the seed is deterministic"}
	cryptoRandRule = &rule{annotations.AllowRand,
		"a replay draws other bytes than the run did",
		"use the context's UUID or Random (ctx.UUID(), ctx.Random()), or draw them in runtime.SideEffect or a step, which record them"}
	uuidRule = &rule{annotations.AllowRand,
		"a replay makes another UUID than the run did",
		"use the context's UUID (ctx.UUID()), which records it, or make it in runtime.SideEffect or a step"}
	deadlineRule = &rule{annotations.AllowTime,
		"the deadline is set from the wall clock, which a replay reads again, and is not recorded",
		"bound a step with its timeout (timeout= on //stem:step, StepOptions.Timeout), a wait with its own timeout, or the run with runtime.WithTimeout when starting it"}
	ioRule = &rule{annotations.AllowIO,
		"files, network, environment and processes are not recorded, so a replay repeats the I/O and may get another answer",
		"move it into a step"}
)

// timeRules are the functions of package time that read the clock or
// wait.
var timeRules = map[string]*rule{
	"Now": clockRule, "Since": clockRule, "Until": clockRule,
	"Sleep": sleepRule,
	"After": timerRule, "Tick": timerRule, "NewTimer": timerRule, "NewTicker": timerRule, "AfterFunc": timerRule,
}

// uuidPath is the import path of github.com/google/uuid, whose New*
// functions draw random UUIDs (or read the clock, for versions 1, 6 and
// 7). It is matched by path, not imported.
const uuidPath = "github.com/google/uuid"

// contextDeadlines are the functions of package context that set a
// deadline from the clock.
var contextDeadlines = set("WithTimeout", "WithDeadline", "WithTimeoutCause", "WithDeadlineCause")

// randConstructors are the functions of math/rand and math/rand/v2 that
// make a source without drawing from one.
var randConstructors = map[string]bool{"New": true, "NewSource": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true}

// ioPackages are the packages whose functions and methods do I/O, with
// their pure helpers, which do not.
var ioPackages = map[string]map[string]bool{
	"os":        set("IsExist", "IsNotExist", "IsPermission", "IsTimeout", "IsPathSeparator", "NewSyscallError", "Expand"),
	"os/exec":   nil,
	"os/signal": nil,
	"os/user":   nil,
	"net": set("ParseIP", "ParseCIDR", "ParseMAC", "IPv4", "IPv4Mask", "CIDRMask", "JoinHostPort", "SplitHostPort",
		"IP.*", "IPNet.*", "IPMask.*", "HardwareAddr.*"),
	"net/http": set("StatusText", "CanonicalHeaderKey", "DetectContentType", "ParseHTTPVersion", "ParseTime",
		"NewRequest", "NewRequestWithContext", "Header.*", "Cookie.*"),
	"net/rpc":      nil,
	"net/smtp":     nil,
	"database/sql": set("Named"),
	"io/ioutil":    nil,
	"syscall":      nil,
}

// filepathIO are the functions of path/filepath that read the file
// system.
var filepathIO = set("Abs", "EvalSymlinks", "Glob", "Walk", "WalkDir")

// pureMethods are methods that describe a value without I/O, whatever
// their package.
var pureMethods = set("Error", "Unwrap", "String", "Timeout", "Temporary")

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// classify returns the rule for a use of obj, a function, method or
// variable of another package, and its name for messages; nil when its
// use is deterministic.
func classify(obj types.Object) (*rule, string) {
	if obj.Pkg() == nil {
		return nil, ""
	}
	path := obj.Pkg().Path()
	switch obj := obj.(type) {
	case *types.Var:
		if obj.IsField() || obj.Parent() != obj.Pkg().Scope() {
			return nil, ""
		}
		name := obj.Pkg().Name() + "." + obj.Name()
		switch path + "." + obj.Name() {
		case "crypto/rand.Reader":
			return cryptoRandRule, name
		case "os.Args", "os.Stdin":
			return ioRule, name
		}
	case *types.Func:
		name, recv := funcName(obj)
		switch {
		case path == "time" && recv == "":
			return timeRules[obj.Name()], name
		case path == "math/rand" || path == "math/rand/v2":
			if recv != "" {
				return sourceRule, name
			}
			if !randConstructors[obj.Name()] {
				return randRule, name
			}
		case path == "crypto/rand":
			return cryptoRandRule, name
		case path == uuidPath:
			if recv == "" && strings.HasPrefix(obj.Name(), "New") {
				return uuidRule, name
			}
		case path == "context":
			if recv == "" && contextDeadlines[obj.Name()] {
				return deadlineRule, name
			}
		case isClock(obj, path):
			return clockRule, name
		case path == "path/filepath":
			if filepathIO[obj.Name()] {
				return ioRule, name
			}
		default:
			pure, ok := ioPackages[path]
			if !ok {
				return nil, ""
			}
			switch {
			case recv != "" && (pureMethods[obj.Name()] || pure[recv+".*"]):
			case recv != "" && path == "database/sql" && strings.HasPrefix(recv, "Null"):
				// sql.NullString and the like are values.
			case recv == "" && pure[obj.Name()]:
			default:
				return ioRule, name
			}
		}
	}
	return nil, ""
}

// isClock reports whether fn, of the package at path, reads a clock the
// way time.Now does: it is named Now, takes no arguments and returns a
// time.Time, as the clocks of clock libraries and of users' own packages
// do (a function or a method, of a type or an interface). Stem's own
// packages are not clocks: the context's Now records its time.
func isClock(fn *types.Func, path string) bool {
	if fn.Name() != "Now" || path == runtimeRoot || strings.HasPrefix(path, runtimeRoot+"/") {
		return false
	}
	sig := fn.Signature()
	if sig.Params().Len() != 0 || sig.Results().Len() != 1 {
		return false
	}
	n, ok := types.Unalias(sig.Results().At(0).Type()).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "time" && n.Obj().Name() == "Time"
}

// runtimeRoot is the module path of Stem, whose packages are not
// reported.
const runtimeRoot = "github.com/stemflow/stem"

// funcName returns a function's name for messages, pkg.F or (*pkg.T).M,
// and the name of its receiver's base type ("" for a function).
func funcName(fn *types.Func) (name, recv string) {
	sig := fn.Signature()
	if sig.Recv() == nil {
		return fn.Pkg().Name() + "." + fn.Name(), ""
	}
	t := sig.Recv().Type()
	ptr := false
	if p, ok := t.(*types.Pointer); ok {
		t, ptr = p.Elem(), true
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		recv = n.Obj().Name()
	}
	qualified := types.TypeString(t, func(p *types.Package) string { return p.Name() })
	if ptr {
		return "(*" + qualified + ")." + fn.Name(), recv
	}
	return qualified + "." + fn.Name(), recv
}
