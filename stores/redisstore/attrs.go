package redisstore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// Search attributes. A run's attributes are the run hash's at field:
// name \0 type \0 value \0 per attribute, the type one letter (attrCode)
// and the value as text (attrText): a string as it is (no attribute
// string holds a NUL byte), a number in the shortest form that reads
// back the same, a time in microseconds since the epoch, a bool 1 or 0.
// The text is canonical: two values of a type are equal exactly when
// their texts are, so the scripts compare, merge and index them as text
// and never convert a number (Lua keeps 14 digits of one). See
// scripts/lib/attrs.lua for the indexes: equality (ae:<name>:<type>:<value>,
// scored by creation), range (an:<name>, at:<name>, scored by value) and
// prefix (as:<name>, value \0 run ID in lexicographic order).

// attrCode is the letter that stands for an attribute type in the at
// field and the equality index's key.
func attrCode(t storage.AttrType) string {
	switch t {
	case storage.AttrString:
		return "s"
	case storage.AttrNumber:
		return "n"
	case storage.AttrTime:
		return "t"
	case storage.AttrBool:
		return "b"
	}
	panic("redisstore: unknown attribute type " + strconv.Quote(string(t)))
}

// attrText is an attribute's value as the at field and the indexes hold
// it. A number is never negative zero (NormalizeAttrs made it zero), so
// that a zero has one text.
func attrText(a storage.Attr) string {
	switch a.Type {
	case storage.AttrString:
		return a.Str
	case storage.AttrNumber:
		n := a.Num
		if n == 0 {
			n = 0
		}
		return strconv.FormatFloat(n, 'g', -1, 64)
	case storage.AttrTime:
		return strconv.FormatInt(a.Time.UnixMicro(), 10)
	case storage.AttrBool:
		if a.Bool {
			return "1"
		}
		return "0"
	}
	return ""
}

// encodeAttrs is the at field of attributes, which the caller validated;
// "" for none. They are normalized first (storage.NormalizeAttrs), so
// that a time is kept to the microsecond, as a run's attributes are
// returned.
func encodeAttrs(attrs []storage.Attr) string {
	var b strings.Builder
	for _, a := range storage.NormalizeAttrs(attrs) {
		b.WriteString(a.Name)
		b.WriteByte(0)
		b.WriteString(attrCode(a.Type))
		b.WriteByte(0)
		b.WriteString(attrText(a))
		b.WriteByte(0)
	}
	return b.String()
}

// decodeAttrs reads an at field, sorted by name; "" is nil.
func decodeAttrs(s string) ([]storage.Attr, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, "\x00")
	if len(parts)%3 != 1 || parts[len(parts)-1] != "" {
		return nil, fmt.Errorf("redisstore: bad stored attributes %q", s)
	}
	out := make([]storage.Attr, 0, len(parts)/3)
	for i := 0; i+2 < len(parts); i += 3 {
		a, err := decodeAttr(parts[i], parts[i+1], parts[i+2])
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b storage.Attr) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// decodeAttr reads one attribute of an at field.
func decodeAttr(name, code, text string) (storage.Attr, error) {
	bad := func() (storage.Attr, error) {
		return storage.Attr{}, fmt.Errorf("redisstore: bad stored attribute %s (type %q, value %q)", name, code, text)
	}
	switch code {
	case "s":
		return storage.StringAttr(name, text), nil
	case "n":
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return bad()
		}
		return storage.NumberAttr(name, f), nil
	case "t":
		us, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return bad()
		}
		return storage.TimeAttr(name, time.UnixMicro(us)), nil
	case "b":
		return storage.BoolAttr(name, text == "1"), nil
	}
	return bad()
}
