package annotations

import (
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// keySpec describes one key of a directive.
type keySpec struct {
	key      string
	flag     bool // takes no value
	required bool
	// set stores the value; it returns the error message and the offset in
	// value of the offending character, or "" when the value is good.
	set func(a Annotation, value string) (msg string, at int)
}

var directives = map[string][]keySpec{
	DirectiveWorkflow: {
		{key: "name", required: true, set: func(a Annotation, v string) (string, int) {
			a.(*Workflow).Name = v
			return checkName("workflow name", v, false)
		}},
		{key: "version", set: func(a Annotation, v string) (string, int) {
			n, msg := parseVersion(v)
			a.(*Workflow).Version = n
			return msg, 0
		}},
		{key: "timeout", set: func(a Annotation, v string) (string, int) {
			d, msg := parseDuration("timeout", v)
			a.(*Workflow).Timeout = d
			return msg, 0
		}},
		{key: "progress", set: func(a Annotation, v string) (string, int) {
			if !token.IsIdentifier(v) {
				return fmt.Sprintf("progress names a type declared in the workflow's package, got %q", v), 0
			}
			a.(*Workflow).Progress = v
			return "", 0
		}},
		{key: "queue", set: func(a Annotation, v string) (string, int) {
			msg, at := nameMessage(storage.CheckQueueName(v))
			if msg == "" {
				a.(*Workflow).Queue = v
			}
			return msg, at
		}},
		{key: "retention", set: func(a Annotation, v string) (string, int) {
			w := a.(*Workflow)
			if v == Forever {
				w.RetainForever = true
				return "", 0
			}
			d, msg := parseRetention(v)
			w.Retention = d
			return msg, 0
		}},
		{key: "existing", set: func(a Annotation, v string) (string, int) {
			msg := oneOfValues("existing", v, ExistingPolicies)
			if msg == "" {
				a.(*Workflow).Existing = v
			}
			return msg, 0
		}},
		{key: "ended", set: func(a Annotation, v string) (string, int) {
			msg := oneOfValues("ended", v, EndedPolicies)
			if msg == "" {
				a.(*Workflow).Ended = v
			}
			return msg, 0
		}},
	},
	DirectiveAttr: {
		{key: "name", required: true, set: func(a Annotation, v string) (string, int) {
			a.(*Attr).Name = v
			return nameMessage(storage.CheckAttrName(v))
		}},
		{key: "type", set: func(a Annotation, v string) (string, int) {
			t := storage.AttrType(v)
			if !t.Valid() {
				return oneOfValues("type", v, attrTypeNames()), 0
			}
			a.(*Attr).Type = t
			return "", 0
		}},
		{key: "from", set: func(a Annotation, v string) (string, int) {
			at := 0
			for seg := range strings.SplitSeq(v, ".") {
				if !token.IsIdentifier(seg) {
					return fmt.Sprintf("from names a field of the workflow's input by its Go path, such as Customer.ID; %q is not a Go identifier", seg), at
				}
				at += len(seg) + 1
			}
			a.(*Attr).From = v
			return "", 0
		}},
	},
	DirectiveStep: {
		{key: "name", required: true, set: func(a Annotation, v string) (string, int) {
			a.(*Step).Name = v
			return checkName("step name", v, false)
		}},
		{key: "version", set: func(a Annotation, v string) (string, int) {
			n, msg := parseVersion(v)
			a.(*Step).Version = n
			return msg, 0
		}},
		{key: "retries", set: func(a Annotation, v string) (string, int) {
			if v == "forever" {
				a.(*Step).Retries = RetryForever
				return "", 0
			}
			if strings.HasPrefix(v, "-") {
				return fmt.Sprintf("retries must not be negative, got %s", v), 0
			}
			n, ok := parseUint(v)
			if !ok {
				return fmt.Sprintf("retries must be a non-negative integer without sign or leading zeros, or forever, got %q", v), 0
			}
			a.(*Step).Retries = n
			return "", 0
		}},
		{key: "backoff", set: func(a Annotation, v string) (string, int) {
			s := a.(*Step)
			first, rest, hasMax := strings.Cut(v, "..")
			d, msg := parseDuration("backoff", first)
			if msg != "" {
				return msg, 0
			}
			s.Backoff = d
			if !hasMax {
				return "", 0
			}
			at := len(first) + len("..")
			m, msg := parseDuration("backoff maximum", rest)
			if msg != "" {
				return msg, at
			}
			if m < d {
				return fmt.Sprintf("backoff maximum %s is less than its start %s", m, d), at
			}
			s.MaxBackoff = m
			return "", 0
		}},
		{key: "jitter", set: func(a Annotation, v string) (string, int) {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || strings.ContainsAny(v, "eEinfINFxX_+-") || f < 0 || f > 1 {
				return fmt.Sprintf("jitter must be a decimal from 0 to 1 such as 0.2, got %q", v), 0
			}
			if f == 0 {
				f = NoJitter
			}
			a.(*Step).Jitter = f
			return "", 0
		}},
		{key: "timeout", set: func(a Annotation, v string) (string, int) {
			d, msg := parseDuration("timeout", v)
			a.(*Step).Timeout = d
			return msg, 0
		}},
		{key: "autoversion", flag: true, set: func(a Annotation, _ string) (string, int) {
			a.(*Step).Autoversion = true
			return "", 0
		}},
		{key: "tx", flag: true, set: func(a Annotation, _ string) (string, int) {
			a.(*Step).Tx = true
			return "", 0
		}},
	},
	DirectiveEvent: {
		{key: "topic", required: true, set: func(a Annotation, v string) (string, int) {
			a.(*Event).Topic = v
			return checkName("topic", v, true)
		}},
		{key: "version", set: func(a Annotation, v string) (string, int) {
			n, msg := parseVersion(v)
			a.(*Event).Version = n
			return msg, 0
		}},
	},
	DirectiveUpdate: {
		{key: "name", required: true, set: func(a Annotation, v string) (string, int) {
			a.(*Update).Name = v
			return nameMessage(storage.CheckUpdateName(v))
		}},
		{key: "reply", required: true, set: func(a Annotation, v string) (string, int) {
			if !token.IsIdentifier(v) {
				return fmt.Sprintf("reply names a type declared in the update's package, got %q", v), 0
			}
			a.(*Update).Reply = v
			return "", 0
		}},
		{key: "validate", set: func(a Annotation, v string) (string, int) {
			if !token.IsIdentifier(v) {
				return fmt.Sprintf("validate names a function declared in the update's package, func(Request) error, got %q", v), 0
			}
			a.(*Update).Validate = v
			return "", 0
		}},
		{key: "version", set: func(a Annotation, v string) (string, int) {
			n, msg := parseVersion(v)
			a.(*Update).Version = n
			return msg, 0
		}},
	},
	DirectiveStream: {
		{key: "name", required: true, set: func(a Annotation, v string) (string, int) {
			a.(*Stream).Name = v
			return nameMessage(storage.CheckStreamName(v))
		}},
		{key: "version", set: func(a Annotation, v string) (string, int) {
			n, msg := parseVersion(v)
			a.(*Stream).Version = n
			return msg, 0
		}},
	},
	DirectiveError: {
		{key: "name", required: true, set: func(a Annotation, v string) (string, int) {
			a.(*ErrorDecl).Name = v
			return nameMessage(storage.CheckErrorName(v))
		}},
	},
	DirectiveAllow: allowSpecs(),
}

// allowSpecs makes each kind of AllowKinds a flag of //stem:allow.
func allowSpecs() []keySpec {
	specs := make([]keySpec, len(AllowKinds))
	for i, k := range AllowKinds {
		specs[i] = keySpec{key: k, flag: true, set: func(a Annotation, _ string) (string, int) {
			al := a.(*Allow)
			al.Kinds = append(al.Kinds, k)
			return "", 0
		}}
	}
	return specs
}

// attrTypeNames lists the attribute types, in the order messages name
// them.
func attrTypeNames() []string {
	names := make([]string, len(storage.AttrTypes))
	for i, t := range storage.AttrTypes {
		names[i] = string(t)
	}
	return names
}

// directiveNames lists the directives in the order messages name them.
var directiveNames = []string{DirectiveWorkflow, DirectiveAttr, DirectiveStep, DirectiveEvent, DirectiveUpdate, DirectiveStream, DirectiveError, DirectiveAllow}

// IsDirective reports whether a comment's text starts a stem directive
// (possibly malformed): whether Parse has anything to say about it.
func IsDirective(text string) bool {
	_, _, ok := spaced(text)
	return strings.HasPrefix(text, Prefix) || ok
}

// spaced reports whether text is a known directive written with spaces
// after the "//" ("// stem:step ..."), returning the offset of "stem:" and
// the directive's name.
func spaced(text string) (at int, name string, ok bool) {
	rest, found := strings.CutPrefix(text, "//")
	if !found {
		return 0, "", false
	}
	trimmed := strings.TrimLeft(rest, " \t")
	if len(trimmed) == len(rest) {
		return 0, "", false
	}
	after, found := strings.CutPrefix(trimmed, "stem:")
	if !found {
		return 0, "", false
	}
	for _, n := range directiveNames {
		if tail, ok := strings.CutPrefix(after, n); ok && (tail == "" || tail[0] == ' ' || tail[0] == '\t') {
			return len(text) - len(trimmed), n, true
		}
	}
	return 0, "", false
}

// ParseComment parses one comment of a comment group; see Parse.
func ParseComment(c *ast.Comment) (Annotation, error) {
	return Parse(c.Slash, c.Text)
}

// Parse parses one comment line, text (including its leading "//"), whose
// "//" is at slash. It returns (nil, nil) when the line is not a stem
// directive. Otherwise it returns the annotation and, if the directive is
// malformed, an ErrorList with every problem at the exact token. The
// annotation is returned even with errors (bad arguments left at their
// defaults) so that callers can go on checking; it is nil only when the
// directive's name is unknown.
func Parse(slash token.Pos, text string) (Annotation, error) {
	if at, name, ok := spaced(text); ok {
		return nil, ErrorList{{Pos: slash + token.Pos(at), Msg: fmt.Sprintf(
			"a directive has no space after //: write %s%s", Prefix, name)}}
	}
	if !strings.HasPrefix(text, Prefix) {
		return nil, nil
	}
	namePos := slash + token.Pos(len(Prefix))
	d, ok := ast.ParseDirective(slash, text)
	if !ok || d.Tool != "stem" {
		return nil, ErrorList{{Pos: namePos, Msg: fmt.Sprintf(
			"malformed directive %q: want %s<name> followed by key=value arguments", text, Prefix)}}
	}
	specs, known := directives[d.Name]
	if !known {
		msg := fmt.Sprintf("unknown directive %s%s; want %s", Prefix, d.Name, oneOf(prefixed(directiveNames)))
		if s := suggest(d.Name, directiveNames); s != "" {
			msg += fmt.Sprintf(" (did you mean %s%s?)", Prefix, s)
		}
		return nil, ErrorList{{Pos: namePos, Msg: msg}}
	}
	var a Annotation
	pos := Positions{Slash: slash, Keys: map[string]token.Pos{}}
	switch d.Name {
	case DirectiveWorkflow:
		a = &Workflow{Version: 1, Positions: pos}
	case DirectiveAttr:
		a = &Attr{Positions: pos}
	case DirectiveStep:
		a = &Step{Version: 1, Positions: pos}
	case DirectiveEvent:
		a = &Event{Version: 1, Positions: pos}
	case DirectiveUpdate:
		a = &Update{Version: 1, Positions: pos}
	case DirectiveStream:
		a = &Stream{Version: 1, Positions: pos}
	case DirectiveError:
		a = &ErrorDecl{Positions: pos}
	case DirectiveAllow:
		a = &Allow{Positions: pos}
	}
	var errs ErrorList
	fail := func(p token.Pos, format string, args ...any) {
		errs = append(errs, &Error{Pos: p, Msg: fmt.Sprintf(format, args...)})
	}
	args, err := d.ParseArgs()
	if err != nil {
		fail(d.ArgsPos, "malformed arguments of %s%s: quoted arguments are not supported", Prefix, d.Name)
		return a, errs
	}
	for _, arg := range args {
		raw := text[int(arg.Pos-slash):]
		if raw[0] == '"' || raw[0] == '`' {
			fail(arg.Pos, "quoted arguments are not supported; write key=value")
			continue
		}
		key, value, hasValue := strings.Cut(arg.Arg, "=")
		i := slices.IndexFunc(specs, func(s keySpec) bool { return s.key == key })
		if i < 0 {
			keys := make([]string, len(specs))
			for j, s := range specs {
				keys[j] = s.key
			}
			msg := fmt.Sprintf("unknown key %q in %s%s; want %s", key, Prefix, d.Name, oneOf(keys))
			if s := suggest(key, keys); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			}
			fail(arg.Pos, "%s", msg)
			continue
		}
		spec := specs[i]
		if _, dup := pos.Keys[key]; dup {
			fail(arg.Pos, "duplicate key %s in %s%s", key, Prefix, d.Name)
			continue
		}
		pos.Keys[key] = arg.Pos
		valuePos := arg.Pos + token.Pos(len(key)+1)
		switch {
		case spec.flag && hasValue:
			fail(arg.Pos+token.Pos(len(key)), "%s is a flag and takes no value: write %s", key, key)
			continue
		case !spec.flag && !hasValue:
			fail(arg.Pos, "%s needs a value: write %s=<value>", key, key)
			continue
		case !spec.flag && value == "":
			fail(valuePos, "empty value for %s", key)
			continue
		}
		if msg, at := spec.set(a, value); msg != "" {
			fail(valuePos+token.Pos(at), "%s", msg)
		}
	}
	if al, ok := a.(*Allow); ok && len(al.Kinds) == 0 && len(errs) == 0 {
		fail(namePos, "%s%s needs the kinds of nondeterminism it allows: %s", Prefix, d.Name, oneOf(AllowKinds))
	}
	for _, spec := range specs {
		if _, ok := pos.Keys[spec.key]; spec.required && !ok {
			fail(namePos, "%s%s needs %s=<%s>", Prefix, d.Name, spec.key, what(d.Name, spec.key))
		}
	}
	// An attribute's type comes from type= or from the input's field
	// from= names.
	if _, ok := a.(*Attr); ok {
		_, typed := pos.Keys["type"]
		_, from := pos.Keys["from"]
		if !typed && !from {
			fail(namePos, "%s%s needs type=<%s>, or from=<field of the input> to take the attribute from the input with the field's type",
				Prefix, d.Name, strings.Join(attrTypeNames(), "|"))
		}
	}
	// A step's key (name@vN) is what the runtime checks at Step: a name at
	// the length limit leaves no room for the version.
	if s, ok := a.(*Step); ok && len(errs) == 0 {
		if msg, _ := nameMessage(storage.CheckStepKey(s.Key())); msg != "" {
			fail(pos.Keys["name"]+token.Pos(len("name=")), "%s", msg)
		}
	}
	if len(errs) == 0 {
		return a, nil
	}
	slices.SortStableFunc(errs, func(x, y *Error) int { return int(x.Pos) - int(y.Pos) })
	return a, errs
}

// what names the value a required key takes, for the message that it is
// missing.
func what(directive, key string) string {
	switch key {
	case "topic":
		return "topic"
	case "reply":
		return "Type"
	case "name":
		if directive == DirectiveAttr {
			return "attribute name"
		}
	}
	return directive + " name"
}

// checkName checks a workflow or step name, or (topic) an event topic, by
// the rules every store and the runtime share (package storage), returning
// a message and the offset of the offending character.
func checkName(kind, v string, topic bool) (string, int) {
	var err error
	switch {
	case topic:
		err = storage.CheckTopic(v)
	case kind == "step name":
		err = storage.CheckStepName(v)
	default:
		err = storage.CheckWorkflowName(v)
	}
	return nameMessage(err)
}

// nameMessage is a storage name error as a message and an offset.
func nameMessage(err error) (string, int) {
	var ne *storage.NameError
	if !errors.As(err, &ne) {
		return "", 0
	}
	return ne.Reason, max(ne.Offset, 0)
}

// parseUint parses a decimal integer without sign or leading zeros.
func parseUint(v string) (int, bool) {
	if v == "" || len(v) > 9 || (len(v) > 1 && v[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

func parseVersion(v string) (int, string) {
	n, ok := parseUint(v)
	if !ok || n < 1 {
		return 1, fmt.Sprintf("version must be a positive integer without sign or leading zeros, got %q", v)
	}
	return n, ""
}

func parseDuration(what, v string) (time.Duration, string) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Sprintf("bad duration %q for %s: want a Go duration such as 200ms, 30s or 1m30s", v, what)
	}
	if d <= 0 {
		return 0, fmt.Sprintf("%s must be positive, got %s", what, v)
	}
	return d, ""
}

// oneOfValues checks that the value of key is one of allowed, returning a
// message naming them (with the closest as a "did you mean") when not.
func oneOfValues(key, v string, allowed []string) string {
	if slices.Contains(allowed, v) {
		return ""
	}
	msg := fmt.Sprintf("%s must be %s, got %q", key, oneOf(allowed), v)
	if s := suggest(v, allowed); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return msg
}

// parseRetention parses a retention other than forever. Zero is refused
// rather than read as forever, so that keeping runs forever is always
// written out; days, which Go durations lack, get the hours to write.
func parseRetention(v string) (time.Duration, string) {
	d, err := time.ParseDuration(v)
	if err != nil {
		msg := fmt.Sprintf("bad duration %q for retention: want a Go duration such as 168h or 720h, or %s", v, Forever)
		if n, ok := parseUint(strings.TrimSuffix(v, "d")); ok && strings.HasSuffix(v, "d") && n > 0 && n <= 100000 {
			msg += fmt.Sprintf(" (Go durations have no days: write %dh for %s)", 24*n, v)
		} else if s := suggest(v, []string{Forever}); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		return 0, msg
	}
	if d == 0 {
		return 0, fmt.Sprintf("retention %s would keep finished runs forever: write retention=%s to say so", v, Forever)
	}
	if d < 0 {
		return 0, fmt.Sprintf("retention must be positive or %s, got %s", Forever, v)
	}
	return d, ""
}

func prefixed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = Prefix + n
	}
	return out
}

// oneOf formats "a, b or c".
func oneOf(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// Suggest returns the candidate closest to s if it is close enough to be a
// likely typo of it, or "". The parser phrases its "did you mean" with it;
// tools checking a directive's value against what a package declares (the
// type progress= names, say) use it to do the same.
func Suggest(s string, candidates []string) string {
	return suggest(s, candidates)
}

// suggest returns the candidate closest to s if it is close enough to be a
// likely typo.
func suggest(s string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := distance(s, c); d < bestDist && d <= len(c)/2 {
			best, bestDist = c, d
		}
	}
	return best
}

// distance is the optimal string alignment distance: edits, with adjacent
// transpositions counting as one.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
