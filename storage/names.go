package storage

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The rules for durable names, one set for everything that writes one: the
// generator (stemgen) at generate time, the runtime at Register, Start,
// Step, Emit, SendEvent and WaitForEvent, and every request's Validate, so
// that each store refuses the same names in the same words before touching
// its database. Lengths are in bytes, as databases and indexes count them.
//
//   - A workflow or step name is 1 to MaxNameLen ASCII letters, digits,
//     '.', '_' and '-' (never '@', '#' or '/', which checkpoint keys,
//     idempotency keys and child run IDs use as separators).
//   - An event topic is 1 to MaxNameLen ASCII letters, digits, '.', '_',
//     '-', '/' and ':', and does not start with ReservedTopicPrefix.
//   - A run ID a caller chooses is 1 to MaxNameLen bytes of valid UTF-8
//     without control characters or '/': '/' is reserved for child runs,
//     whose IDs are "<parent ID>/<call key>" (see ValidateNewRuns).
//   - A step key as a workflow writes it (name@vN for generated steps) is 1
//     to MaxNameLen bytes of valid UTF-8 without control characters or '#',
//     which autoversion iterations use (key#N).
//
// Names the runtime derives from these (a child's run ID, an autoversion
// key, the topic a parent waits on for its child) may be up to
// MaxDerivedLen bytes long. Their keys follow the rules above; a part
// taken from a run ID is held only to what every store can hold (valid
// UTF-8 without NUL), so runs stored before these rules keep working.
// Lookups (filters, cursors, the run an event is sent to) are held to the
// same, so that every store answers them alike.

// MaxNameLen is the longest, in bytes, a workflow name, step name, event
// topic, caller-chosen run ID or step key may be.
const MaxNameLen = 128

// MaxDerivedLen is the longest, in bytes, a name the runtime derives may be:
// a child run's ID (its parent's ID, '/', its call's key, nested for
// grandchildren), a stored checkpoint key ("key#N", "key/result"), the topic
// a parent waits on for its child.
const MaxDerivedLen = 1024

// ReservedTopicPrefix starts the topics the runtime delivers on itself (a
// child's outcome travels to its parent on "stem.child/<child run ID>"). No
// caller may emit, send or wait on such a topic, so nobody can forge a
// child's outcome.
const ReservedTopicPrefix = "stem."

// NameError is a durable name refused by the rules above. It matches
// ErrInvalidArgument.
type NameError struct {
	// Field says what the name is: "workflow name", "step name", "step
	// key", "event topic", "run ID".
	Field string
	// Value is the name refused.
	Value string
	// Offset is the byte offset in Value of the character refused, or -1
	// when the name is refused as a whole (empty, too long, reserved).
	Offset int
	// Reason says what is wrong, naming Field and quoting Value: the error's
	// text after the sentinel's.
	Reason string
}

// Error returns the sentinel's text and the reason.
func (e *NameError) Error() string { return ErrInvalidArgument.Error() + ": " + e.Reason }

// Unwrap returns ErrInvalidArgument.
func (e *NameError) Unwrap() error { return ErrInvalidArgument }

// The characters names may hold besides ASCII letters and digits, as
// messages list them.
const (
	nameChars  = "._-"
	topicChars = "._-/:"
	nameHint   = "use ASCII letters, digits, '.', '_' and '-'"
	topicHint  = "use ASCII letters, digits, '.', '_', '-', '/' and ':'"
)

// CheckWorkflowName checks a workflow's durable name.
func CheckWorkflowName(name string) error {
	return checkASCII("workflow name", name, nameChars, nameHint)
}

// CheckErrorName checks the durable name a declared error is recorded
// under (runtime.DeclareError, //stem:error).
func CheckErrorName(name string) error {
	return checkASCII("error name", name, nameChars, nameHint)
}

// CheckStepName checks a step's durable name, as an annotation gives it
// (its key adds the version: name@vN).
func CheckStepName(name string) error {
	return checkASCII("step name", name, nameChars, nameHint)
}

// CheckTopic checks an event topic a caller emits, sends, waits on or
// registers: reserved topics (ReservedTopicPrefix) are refused.
func CheckTopic(topic string) error {
	if err := checkASCII("event topic", topic, topicChars, topicHint); err != nil {
		return err
	}
	if strings.HasPrefix(topic, ReservedTopicPrefix) {
		return nameErr("event topic", topic, -1, "event topic %q: topics starting with %q are reserved: the runtime delivers its own events on them (a child's outcome to its parent)", topic, ReservedTopicPrefix)
	}
	return nil
}

// CheckRunID checks a run ID a caller chooses (Start with an ID, a batch
// item's ID, stem start --id). '/' is refused: it separates a child run's
// ID from its parent's.
func CheckRunID(id string) error {
	if err := checkText("run ID", id, MaxNameLen); err != nil {
		return err
	}
	if i := strings.IndexByte(id, '/'); i >= 0 {
		return nameErr("run ID", id, i, "run ID %q: run IDs may not contain '/': it is reserved for child runs, <parent>/<call>", id)
	}
	return nil
}

// CheckStepKey checks a checkpoint key as a workflow passes it to a step,
// an event wait or a child call. '#' is refused: it separates an
// autoversion step's key from its iteration (key#N).
func CheckStepKey(key string) error {
	if err := checkText("step key", key, MaxNameLen); err != nil {
		return err
	}
	if i := strings.IndexByte(key, '#'); i >= 0 {
		return nameErr("step key", key, i, "invalid character '#' in step key %q: '#' is reserved for autoversion iterations (key#N)", key)
	}
	return nil
}

// checkASCII checks a name of ASCII letters, digits and the extra
// characters, of 1 to MaxNameLen bytes.
func checkASCII(field, v, extra, hint string) error {
	return checkASCIIUpTo(field, v, MaxNameLen, extra, hint)
}

// checkASCIIUpTo is checkASCII for names of 1 to max bytes.
func checkASCIIUpTo(field, v string, max int, extra, hint string) error {
	if err := checkLen(field, v, max); err != nil {
		return err
	}
	for i, r := range v {
		ok := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune(extra, r)
		if ok {
			continue
		}
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(v[i:]); n <= 1 {
				return nameErr(field, v, i, "invalid UTF-8 at byte %d of %s %q", i, field, v)
			}
		}
		return nameErr(field, v, i, "invalid character %q in %s %q: %s", r, field, v, hint)
	}
	return nil
}

// checkText checks a name of any characters but control characters, in
// valid UTF-8, of 1 to max bytes.
func checkText(field, v string, max int) error {
	if err := checkLen(field, v, max); err != nil {
		return err
	}
	for i, r := range v {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(v[i:]); n <= 1 {
				return nameErr(field, v, i, "invalid UTF-8 at byte %d of %s %q", i, field, v)
			}
		case unicode.IsControl(r):
			return nameErr(field, v, i, "invalid character %q in %s %q: no control characters", r, field, v)
		}
	}
	return nil
}

func checkLen(field, v string, max int) error {
	switch {
	case v == "":
		return nameErr(field, v, -1, "%s is empty", field)
	case len(v) > max:
		return nameErr(field, v, -1, "%s is %d bytes long, at most %d: %s", field, len(v), max, quoteStart(v))
	}
	return nil
}

// checkStorable checks a string a request looks something up by (a filter,
// a cursor, an owner): valid UTF-8 without NUL, which no store could hold,
// so every store answers alike. Stricter rules apply where names are
// created; a lookup must still find what was stored before them.
func checkStorable(field, v string) error {
	if i := strings.IndexByte(v, 0); i >= 0 {
		return nameErr(field, v, i, "invalid character '\\x00' in %s %q", field, v)
	}
	if !utf8.ValidString(v) {
		i := 0
		for i < len(v) {
			r, n := utf8.DecodeRuneInString(v[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return nameErr(field, v, i, "invalid UTF-8 at byte %d of %s %q", i, field, v)
	}
	return nil
}

// quoteStart quotes the start of a long value.
func quoteStart(v string) string {
	const n = 40
	if len(v) <= n {
		return fmt.Sprintf("%q", v)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", v[:cut])
}

func nameErr(field, v string, at int, format string, args ...any) *NameError {
	return &NameError{Field: field, Value: v, Offset: at, Reason: fmt.Sprintf(format, args...)}
}
