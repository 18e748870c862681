package ui

import (
	"slices"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// An attribute search splits at spaces and commas outside double quotes;
// a value the runs table links to is written so that it reads back.
func TestSplitWhere(t *testing.T) {
	for text, want := range map[string][]string{
		"customer=C-7 total>=100":       {"customer=C-7", "total>=100"},
		"customer=C-7,total>=100, x^=a": {"customer=C-7", "total>=100", "x^=a"},
		"  a=1 \t b=2  ":                {"a=1", "b=2"},
		`note="two words, one comma"`:   {"note=two words, one comma"},
		`note="say \"hi\"" path="a\\b"`: {`note=say "hi"`, `path=a\b`},
		`empty=""`:                      {"empty="},
		"":                              nil,
		`"quoted name"=x`:               {"quoted name=x"},
	} {
		got, err := splitWhere(text)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitWhere(%q) = %q, %v; want %q", text, got, err, want)
		}
	}
	if _, err := splitWhere(`note="open`); err == nil {
		t.Errorf("an open quote: no error")
	}
	for _, a := range []storage.Attr{storage.StringAttr("note", "two words, one \"quote\" \\"), storage.StringAttr("e", ""),
		storage.NumberAttr("total", 99.5), storage.TimeAttr("due", time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)), storage.BoolAttr("rush", true)} {
		terms, err := splitWhere(whereTerm(a))
		if err != nil || len(terms) != 1 {
			t.Fatalf("whereTerm(%v) = %q reads back as %q, %v", a, whereTerm(a), terms, err)
		}
		f, err := storage.ParseAttrFilter(terms[0], map[string]storage.AttrType{a.Name: a.Type})
		if err != nil || f.Op != storage.OpEq || !f.Value.Equal(a) {
			t.Errorf("whereTerm(%v) = %q reads back as %v, %v", a, whereTerm(a), f, err)
		}
	}
}

// Relative times: seconds, minutes, hours, days, then the date.
func TestRelative(t *testing.T) {
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		2 * time.Second: "just now", 12 * time.Second: "12 s ago", 3*time.Minute + 59*time.Second: "3 min ago",
		5 * time.Hour: "5 h ago", 47 * time.Hour: "47 h ago", 4 * 24 * time.Hour: "4 days ago",
		40 * 24 * time.Hour: "2025-01-01", -3 * time.Minute: "in 3 min",
	} {
		if got := relative(d, at); got != want {
			t.Errorf("relative(%v) = %q, want %q", d, got, want)
		}
	}
	if a := since(at.Add(1500*time.Microsecond), at.Add(time.Hour)); a.Exact != "2025-01-01 00:00:00.001Z" || a.Text != "59 min ago" {
		t.Errorf("since: %+v", a)
	}
}
