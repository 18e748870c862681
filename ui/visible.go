package ui

import (
	"fmt"
	"html/template"
	"strings"
	"unicode/utf8"

	"github.com/stemflow/stem/storage"
)

// shown is a name (a run ID, a step key, a worker ID) as a page shows it
// in text: HTML-escaped, with every character that does not show or that
// reorders the text around it (storage.Invisible: a bidirectional
// override, a zero-width space, a control character) and every byte that
// is not UTF-8 written as a marked escape, <span class="esc">\u202E</span>,
// which the stylesheet sets apart from the name's own characters. The
// rules on names refuse such characters now; a store may hold them from
// before, and two IDs that differ in one must never look the same.
func shown(s string) template.HTML {
	if !needsEscape(s) {
		return template.HTML(template.HTMLEscapeString(s))
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `<span class="esc" title="a byte that is not UTF-8">\x%02X</span>`, s[i])
		case storage.Invisible(r):
			fmt.Fprintf(&b, `<span class="esc" title="U+%04X, a character that does not show">%s</span>`, r, escapeRune(r))
		default:
			b.WriteString(template.HTMLEscapeString(s[i : i+n]))
		}
		i += n
	}
	return template.HTML(b.String())
}

// shownPlain is a name as shown where markup cannot go (a page's title):
// each invisible character and each byte that is not UTF-8 as an escape,
// \u202E, \xFF.
func shownPlain(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02X`, s[i])
		case storage.Invisible(r):
			b.WriteString(escapeRune(r))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// needsEscape reports whether s holds an invisible character or a byte
// that is not UTF-8.
func needsEscape(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsFunc(s, storage.Invisible)
}

// escapeRune is r as a Go escape: \u202E, \U000E0041.
func escapeRune(r rune) string {
	if r > 0xffff {
		return fmt.Sprintf(`\U%08X`, r)
	}
	return fmt.Sprintf(`\u%04X`, r)
}
