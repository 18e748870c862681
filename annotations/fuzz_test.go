package annotations

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, positions every error inside
// the line, and that a directive it accepts round-trips through String.
// Run it with: go test ./annotations -fuzz FuzzParse
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"//stem:workflow name=orders.fulfil version=2",
		"//stem:workflow name=orders.fulfil timeout=72h progress=FulfilProgress",
		"//stem:workflow name=w progres=P timeout=0s",
		"//stem:workflow name=w queue=orders retention=720h",
		"//stem:workflow name=w queue=a@b retention=0s queu=x retentoin=forever",
		"//stem:workflow name=w retention=forever",
		"//stem:workflow name=w existing=fail ended=reuse-failed",
		"//stem:workflow name=w existing=replce ended=reuse_failed",
		"//stem:step name=reserve retries=5 backoff=200ms..30s timeout=10s autoversion",
		"//stem:step name=pay tx autoversion",
		"//stem:step name=pay tx=pgx",
		"//stem:event topic=shipment.ready",
		"//stem:update name=orders.cancel reply=Cancelled validate=checkCancel version=2",
		"//stem:update name=a@b rpely=R validate=pkg.v",
		"//stem:stream name=orders.log version=2",
		"//stem:attr name=customer from=Customer.ID",
		"//stem:attr name=total type=number from=Total",
		"//stem:attr name=a@b typ=int from=A..B",
		"//stem:steam name=a#b",
		"//stem:stpe name=x",
		"// stem:step name=x",
		"//stem:step name=a name=b retries=-1 backoff=2s..1s",
		"//stem:event topic=\"x\" `y`",
		"// plain comment",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n\r") {
			t.Skip("a // comment is one line")
		}
		a, err := Parse(base, line)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("Parse(%q) error %v is not a non-empty ErrorList", line, err)
			}
			for _, e := range list {
				if e.Pos < base || int(e.Pos-base) > len(line) {
					t.Fatalf("Parse(%q): error %q at offset %d outside the line", line, e.Msg, e.Pos-base)
				}
				if e.Msg == "" {
					t.Fatalf("Parse(%q): empty message", line)
				}
			}
			return
		}
		if a == nil {
			if strings.HasPrefix(line, Prefix) || IsDirective(line) {
				t.Fatalf("Parse(%q) = nil, nil for a directive", line)
			}
			return
		}
		s := a.String()
		b, err := Parse(base, s)
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", line, s, err)
		}
		if !reflect.DeepEqual(stripPositions(a), stripPositions(b)) {
			t.Fatalf("round trip of %q through %q: %#v != %#v", line, s, a, b)
		}
		if b.String() != s {
			t.Fatalf("String() not canonical: %q then %q", s, b.String())
		}
	})
}
