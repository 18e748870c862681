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

// attrFilter is a filter as find.lua reads it: the name, type code,
// comparison and value text. A time with a fraction of a microsecond is
// moved to the microsecond below, with the comparison that keeps the
// same runs (runs' times are whole microseconds): < v and <= v keep
// those at or before it, > v and >= v those after it; = v keeps none
// (ok false).
func attrFilter(f storage.AttrFilter) (name, code, op, text string, ok bool) {
	a, op := f.Value, string(f.Op)
	if a.Type == storage.AttrTime && a.Time.Nanosecond()%1000 != 0 {
		switch f.Op {
		case storage.OpEq:
			return "", "", "", "", false
		case storage.OpLt, storage.OpLe:
			op = string(storage.OpLe)
		case storage.OpGt, storage.OpGe:
			op = string(storage.OpGt)
		}
	}
	return a.Name, attrCode(a.Type), op, attrText(a), true
}

// attrDrivers are the indexes find.lua may read a listing filtered by
// attributes through, four script arguments each (see find.lua): the
// equality index of each = filter, the range index of each number or
// time name that ranges filter (their bounds intersected, inclusive: the
// script compares the values themselves, so the index need only hold
// every run that passes), and the prefix index range of each ^= filter.
// It returns false when no run can pass (an equality on a time with a
// fraction of a microsecond).
func attrDrivers(where []storage.AttrFilter) ([]any, bool) {
	type bounds struct {
		code   string
		lo, hi string
		num    [2]float64
		us     [2]int64
		has    [2]bool
	}
	var out []any
	ranges := map[string]*bounds{}
	var order []string
	for _, f := range where {
		name, code, op, text, ok := attrFilter(f)
		if !ok {
			return nil, false
		}
		switch storage.AttrOp(op) {
		case storage.OpEq:
			out = append(out, "e", name, code, text)
		case storage.OpPrefix:
			hi := "+"
			if end, ok := storage.PrefixEnd(text); ok {
				hi = "(" + end
			}
			out = append(out, "p", name, "["+text, hi)
		default:
			key := code + name
			b := ranges[key]
			if b == nil {
				b = &bounds{code: code}
				ranges[key] = b
				order = append(order, key)
			}
			side := 0 // a lower bound
			if op == string(storage.OpLt) || op == string(storage.OpLe) {
				side = 1
			}
			if code == "n" {
				v := f.Value.Num
				if !b.has[side] || side == 0 && v > b.num[0] || side == 1 && v < b.num[1] {
					b.num[side] = v
				}
			} else {
				v, _ := strconv.ParseInt(text, 10, 64)
				if !b.has[side] || side == 0 && v > b.us[0] || side == 1 && v < b.us[1] {
					b.us[side] = v
				}
			}
			b.has[side] = true
		}
	}
	for _, key := range order {
		b := ranges[key]
		lo, hi := "-inf", "+inf"
		for side, text := range []*string{&lo, &hi} {
			if !b.has[side] {
				continue
			}
			if b.code == "n" {
				*text = strconv.FormatFloat(b.num[side], 'g', -1, 64)
			} else {
				*text = strconv.FormatInt(b.us[side], 10)
			}
		}
		out = append(out, b.code, key[1:], lo, hi)
	}
	return out, true
}
