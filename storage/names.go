package storage

import (
	"fmt"
	"strconv"
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
//     without invisible characters (see Invisible) or '/': '/' is reserved
//     for child runs, whose IDs are "<parent ID>/<call key>" (see
//     ValidateNewRuns).
//   - A step key as a workflow writes it (name@vN for generated steps) is 1
//     to MaxNameLen bytes of valid UTF-8 without invisible characters or
//     '#', which autoversion iterations use (key#N).
//
// Invisible characters are refused wherever names may hold more than
// ASCII (run IDs, step keys, a child's call key, partition keys): a
// bidirectional override (U+202E) or a zero-width space would let
// one ID look like another, in the dashboard, in a terminal and in logs.
// The ASCII-only names (workflows, steps, topics, queues, schedules) hold
// none by their rule.
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
	if err := checkVisible("run ID", id, MaxNameLen); err != nil {
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
	if err := checkVisible("step key", key, MaxNameLen); err != nil {
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
				return nameErr(field, v, i, "invalid UTF-8 at byte %d of %s %s", i, field, quote(v))
			}
		}
		if Invisible(r) && !unicode.IsControl(r) {
			return nameErr(field, v, i, "invalid character %s in %s %s: %s", quoteRune(r), field, quote(v), hint)
		}
		return nameErr(field, v, i, "invalid character %q in %s %q: %s", r, field, v, hint)
	}
	return nil
}

// checkVisible checks a name of any characters but control and other
// invisible characters (Invisible), in valid UTF-8, of 1 to max bytes.
func checkVisible(field, v string, max int) error {
	if err := checkText(field, v, max); err != nil {
		return err
	}
	for i, r := range v {
		if Invisible(r) {
			return nameErr(field, v, i, "%s %s holds %s at byte %d: %s", field, quote(v), describeRune(r), i, invisibleWhy(r))
		}
	}
	return nil
}

// checkText checks text of any characters but control characters, in
// valid UTF-8, of 1 to max bytes: what a header value may hold. Names
// follow checkVisible.
func checkText(field, v string, max int) error {
	if err := checkLen(field, v, max); err != nil {
		return err
	}
	for i, r := range v {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(v[i:]); n <= 1 {
				return nameErr(field, v, i, "invalid UTF-8 at byte %d of %s %s", i, field, quote(v))
			}
		case unicode.IsControl(r):
			return nameErr(field, v, i, "invalid character %q in %s %s: no control characters", r, field, quote(v))
		}
	}
	return nil
}

// Invisible reports whether a name may not hold r because r does not show
// as itself, or changes how the text around it shows, so that a name
// holding it could pass for another: control characters (Cc); format
// characters (Cf: the bidirectional marks, embeddings, overrides and
// isolates U+200E, U+200F, U+202A to U+202E and U+2066 to U+2069, the
// zero-width space, joiners and word joiner U+200B to U+200D and U+2060,
// the invisible operators U+2061 to U+2064, the byte order mark U+FEFF,
// the soft hyphen U+00AD, tags); the line and paragraph separators; every
// space but ASCII's (U+00A0, U+2000 to U+200A, U+3000, ...); variation
// selectors; and the other default-ignorable code points (the Hangul
// fillers, the combining grapheme joiner U+034F). What displays names a
// store may hold from before these rules escapes the same characters.
func Invisible(r rune) bool {
	switch {
	case r < 0x80:
		return r < 0x20 || r == 0x7f
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.White_Space,
		unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point):
		return true
	}
	return false
}

// invisibleWhy says why an invisible character r is refused.
func invisibleWhy(r rune) string {
	switch {
	case unicode.Is(unicode.Cf, r):
		return "invisible format characters are not allowed"
	case unicode.Is(unicode.White_Space, r):
		return "spaces other than ' ' are not allowed"
	}
	return "invisible characters are not allowed"
}

// runeNames name the invisible characters messages meet most.
var runeNames = map[rune]string{
	0x00a0: "NO-BREAK SPACE",
	0x00ad: "SOFT HYPHEN",
	0x034f: "COMBINING GRAPHEME JOINER",
	0x061c: "ARABIC LETTER MARK",
	0x115f: "HANGUL CHOSEONG FILLER",
	0x1160: "HANGUL JUNGSEONG FILLER",
	0x180e: "MONGOLIAN VOWEL SEPARATOR",
	0x200b: "ZERO WIDTH SPACE",
	0x200c: "ZERO WIDTH NON-JOINER",
	0x200d: "ZERO WIDTH JOINER",
	0x200e: "LEFT-TO-RIGHT MARK",
	0x200f: "RIGHT-TO-LEFT MARK",
	0x2028: "LINE SEPARATOR",
	0x2029: "PARAGRAPH SEPARATOR",
	0x202a: "LEFT-TO-RIGHT EMBEDDING",
	0x202b: "RIGHT-TO-LEFT EMBEDDING",
	0x202c: "POP DIRECTIONAL FORMATTING",
	0x202d: "LEFT-TO-RIGHT OVERRIDE",
	0x202e: "RIGHT-TO-LEFT OVERRIDE",
	0x202f: "NARROW NO-BREAK SPACE",
	0x205f: "MEDIUM MATHEMATICAL SPACE",
	0x2060: "WORD JOINER",
	0x2061: "FUNCTION APPLICATION",
	0x2062: "INVISIBLE TIMES",
	0x2063: "INVISIBLE SEPARATOR",
	0x2064: "INVISIBLE PLUS",
	0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE",
	0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE",
	0x3000: "IDEOGRAPHIC SPACE",
	0x3164: "HANGUL FILLER",
	0xfe0f: "VARIATION SELECTOR-16",
	0xfeff: "ZERO WIDTH NO-BREAK SPACE",
	0xffa0: "HALFWIDTH HANGUL FILLER",
}

// describeRune is r as a message names it: U+202E RIGHT-TO-LEFT OVERRIDE,
// or its code point alone for a character runeNames does not name.
func describeRune(r rune) string {
	if n, ok := runeNames[r]; ok {
		return fmt.Sprintf("U+%04X %s", r, n)
	}
	return fmt.Sprintf("U+%04X", r)
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
		return quote(v)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return quote(v[:cut]) + "…"
}

// quote is v as a Go string literal, as %q writes it, with the invisible
// characters %q leaves as they are (Hangul fillers, variation selectors,
// which Go counts printable) escaped too, so a message shows every
// character a name holds.
func quote(v string) string {
	return escapeInvisible(strconv.Quote(v))
}

// quoteRune is r as a Go rune literal, escaped as quote escapes it.
func quoteRune(r rune) string {
	return escapeInvisible(strconv.QuoteRune(r))
}

func escapeInvisible(q string) string {
	if !strings.ContainsFunc(q, Invisible) {
		return q
	}
	var b strings.Builder
	for _, r := range q {
		switch {
		case !Invisible(r):
			b.WriteRune(r)
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func nameErr(field, v string, at int, format string, args ...any) *NameError {
	return &NameError{Field: field, Value: v, Offset: at, Reason: fmt.Sprintf(format, args...)}
}
