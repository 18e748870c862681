package manifest

import (
	"fmt"
	"strings"
)

// Compatibility is judged the way encoding/json decodes, as buf breaking
// judges wire and JSON compatibility: a change of shape is compatible when
// every value a build stored in the old shape decodes into the new one
// without an error and without changing what it says. Runs in flight hold
// such values — inputs, step results, progress, delivered events — and
// the next build decodes them.
//
// Compatible, so needing no version bump:
//
//   - a field added to a struct: stored values lack it, and decode with
//     it zero (and a value with it decodes into the old type, which
//     ignores it);
//   - a field whose JSON name changes only in case: encoding/json matches
//     a stored key to a field ignoring case;
//   - a number widened: int8 → int16 → int32 → int64, uint8 → … → uint64,
//     an unsigned integer into a wider signed one, float32 → float64, an
//     integer into a float that holds all its values exactly (up to 16
//     bits into float32, up to 32 into float64); Go's int counts as 32 to
//     64 bits, so int32 → int → int64, never int64 → int;
//   - an array into a slice, or into a longer array;
//   - a map's integer keys into string keys (encoding/json keeps the
//     key's text), and a struct into a map with string keys whose values
//     take every field;
//   - anything into an interface (any);
//   - T into *T and back: pointers have their element's shape.
//
// Breaking, so refused without a new version:
//
//   - a field removed, which is how a rename (of its JSON name) looks
//     too: stored values decode without error, but a renamed field reads
//     zero in every run in flight, and what a removed field held is
//     dropped at the next write of the value;
//   - a number narrowed, made unsigned, or made a float that would round
//     (int64 → float64 above 2^53), and a float made an integer;
//   - any other change of kind: string ↔ number, scalar ↔ slice or
//     struct, bytes ↔ string (a stored base64 string would be read as its
//     text), a slice into an array, an array shortened, string map keys
//     into integer keys, a map into a struct, an interface into a
//     concrete type;
//   - a type that decodes itself (time.Time, a json.Marshaler) replaced by
//     another shape, or a recursive reference to another type: what it
//     stored is not known here;
//   - fields whose names differ only in case, beside each other: a
//     stored key may decode into either.

// CompareOptions says how to read the shapes Compare compares.
type CompareOptions struct {
	// OldUnsized says the old shape comes from a manifest before format
	// 3, whose int, uint and float are numbers of a size it did not
	// record: an int may then become any signed integer, a uint any
	// unsigned one and a float either float (as stemgen judged them then),
	// and nothing else.
	OldUnsized bool
}

// Break is one place where a value stored in an old shape may not decode
// into a new one, or would decode into something else.
type Break struct {
	// Path is where: "items[].qty"; "" for the value itself. Elements of
	// slices and arrays are written [], a map's values [key], a step's
	// parameters #1, #2, ... (when it has several).
	Path string
	// Was and Now are the shapes there; Now is "" for a removed field.
	Was, Now string
	// Why says what a stored value would do.
	Why string
}

// String says where and what changed, and what a stored value would do.
func (b Break) String() string {
	where := ""
	if b.Path != "" {
		where = b.Path + ": "
	}
	if b.Now == "" {
		return where + b.Why
	}
	return fmt.Sprintf("%s%s became %s: %s", where, b.Was, b.Now, b.Why)
}

// Compare returns the places where a value stored in shape old may not
// decode into shape now, or would decode into something else, in the
// order of the shapes' fields; none when the change is compatible (see
// above).
func Compare(old, now *Shape, opts CompareOptions) []Break {
	c := &comparer{opts: opts}
	c.compare(old, now, "")
	return c.breaks
}

type comparer struct {
	opts   CompareOptions
	breaks []Break
}

func (c *comparer) add(path string, old, now *Shape, why string, args ...any) {
	b := Break{Path: path, Was: old.String(), Why: fmt.Sprintf(why, args...)}
	if now != nil {
		b.Now = now.String()
	}
	c.breaks = append(c.breaks, b)
}

func (c *comparer) compare(old, now *Shape, path string) {
	switch {
	case now.Kind == ShapeAny:
		return // every JSON value decodes into an interface
	case old.Kind == ShapeTuple && now.Kind == ShapeTuple:
		c.tuple(old, now, path)
		return
	case old.Kind == ShapeNamed || now.Kind == ShapeNamed:
		if old.Kind != now.Kind || old.Name != now.Name {
			c.add(path, old, now, "a type that encodes itself writes what its own methods say, which no other shape is known to decode")
		}
		return
	case old.Kind == ShapeRef || now.Kind == ShapeRef:
		if old.Kind != now.Kind || old.Name != now.Name {
			c.add(path, old, now, "a recursive reference is judged by the type it names, which changed")
		}
		return
	case isNumber(old.Kind) && isNumber(now.Kind):
		if why := c.number(old, now); why != "" {
			c.add(path, old, now, "%s", why)
		}
		return
	}
	switch old.Kind {
	case ShapeBool, ShapeString, ShapeBytes:
		if now.Kind == old.Kind {
			return
		}
		if old.Kind == ShapeBytes && now.Kind == ShapeString {
			c.add(path, old, now, "a stored value, a base64 string, would decode as its base64 text, not the bytes")
			return
		}
	case ShapeAny:
		c.add(path, old, now, "a stored value may be of any JSON kind, which %s does not take", now)
		return
	case ShapeSlice:
		switch now.Kind {
		case ShapeSlice:
			c.compare(old.Elem, now.Elem, path+"[]")
			return
		case ShapeArray:
			c.add(path, old, now, "a stored slice longer than %d would lose its other elements", now.Len)
			return
		}
	case ShapeArray:
		switch now.Kind {
		case ShapeSlice:
			c.compare(old.Elem, now.Elem, path+"[]")
			return
		case ShapeArray:
			if now.Len < old.Len {
				c.add(path, old, now, "a stored array would lose its elements after the first %d", now.Len)
				return
			}
			c.compare(old.Elem, now.Elem, path+"[]")
			return
		}
	case ShapeMap:
		switch now.Kind {
		case ShapeMap:
			if why := c.key(old.Key, now.Key); why != "" {
				c.add(path, old, now, "its keys are %s now: %s", now.Key, why)
			}
			c.compare(old.Elem, now.Elem, path+"[key]")
			return
		case ShapeStruct:
			c.add(path, old, now, "a stored map's keys that name no field would be dropped")
			return
		}
	case ShapeStruct:
		switch now.Kind {
		case ShapeStruct:
			c.fields(old, now, path)
			return
		case ShapeMap:
			if now.Key.Kind != ShapeString {
				c.add(path, old, now, "a stored object's keys are field names, which %s keys do not take", now.Key)
				return
			}
			for _, f := range old.Fields {
				c.compare(f.Shape, now.Elem, member(path, f.Name))
			}
			return
		}
	}
	c.add(path, old, now, "%s", kindChange(old, now))
}

// fields compares two struct shapes: every stored field must find its
// field in the new shape as encoding/json finds it (the same name, else
// one equal ignoring case) and decode into it, alone.
func (c *comparer) fields(old, now *Shape, path string) {
	into := map[string][]string{} // new field name → the old fields decoding into it
	for _, f := range old.Fields {
		nf := field(now, f.Name)
		at := member(path, f.Name)
		if nf == nil {
			c.breaks = append(c.breaks, Break{Path: at, Was: f.Shape.String(),
				Why: "removed (or renamed): values of the old shape hold it, and the new type drops it, " +
					"so a renamed field reads zero for every run in flight"})
			continue
		}
		into[nf.Name] = append(into[nf.Name], f.Name)
		c.compare(f.Shape, nf.Shape, at)
	}
	for _, nf := range now.Fields {
		if olds := into[nf.Name]; len(olds) > 1 {
			c.breaks = append(c.breaks, Break{Path: member(path, nf.Name), Was: nf.Shape.String(),
				Why: fmt.Sprintf("stored fields %s all decode into it (encoding/json matches names ignoring case), the last one written winning",
					strings.Join(olds, ", "))})
		}
		if len(into[nf.Name]) > 0 {
			continue
		}
		// An added field whose name differs only in case from one that
		// stored fields decode into: a stored key of that name, as this
		// build or an earlier one wrote it, may decode into either.
		for _, f := range now.Fields {
			if f.Name != nf.Name && strings.EqualFold(f.Name, nf.Name) && len(into[f.Name]) > 0 {
				c.breaks = append(c.breaks, Break{Path: member(path, nf.Name), Was: nf.Shape.String(),
					Why: fmt.Sprintf("added beside %s, whose name differs only in case: encoding/json matches names ignoring case, so a stored %s may decode into either",
						f.Name, f.Name)})
				break
			}
		}
	}
}

// tuple compares a step's parameters (or results): the same number, each
// compatible.
func (c *comparer) tuple(old, now *Shape, path string) {
	if len(old.Elems) != len(now.Elems) {
		c.add(path, old, now, "the number of values changed from %d to %d", len(old.Elems), len(now.Elems))
		return
	}
	for i := range old.Elems {
		at := path
		if len(old.Elems) > 1 {
			at = fmt.Sprintf("%s#%d", path, i+1)
		}
		c.compare(old.Elems[i], now.Elems[i], at)
	}
}

// key says why a stored map key of shape old may not decode into a key
// of shape now, or "".
func (c *comparer) key(old, now *Shape) string {
	switch {
	case now.Kind == ShapeString && (old.Kind == ShapeString || old.Kind == ShapeInt || old.Kind == ShapeUint):
		return "" // encoding/json keeps a key's text
	case isNumber(old.Kind) && isNumber(now.Kind) && now.Kind != ShapeFloat:
		return c.number(old, now)
	case old.Kind == now.Kind && old.Kind == ShapeNamed && old.Name == now.Name:
		return ""
	}
	return kindChange(old, now)
}

func isNumber(k ShapeKind) bool { return k == ShapeInt || k == ShapeUint || k == ShapeFloat }

// span is what a number's shape may hold: an integer of lo to hi bits
// (Go's int is 32 to 64), a float of lo to hi bits.
func span(s *Shape) (lo, hi int) {
	switch {
	case s.Bits != 0:
		return s.Bits, s.Bits
	case s.Kind == ShapeFloat:
		return 64, 64 // an unsized float is float64, but for OldUnsized
	}
	return 32, 64
}

// number says why every stored number of shape old may not decode into
// shape now exactly, or "".
func (c *comparer) number(old, now *Shape) string {
	if old.Kind == now.Kind && old.Bits == now.Bits {
		return "" // the same type, even Go's int on another platform
	}
	if c.opts.OldUnsized && old.Bits == 0 {
		if old.Kind == now.Kind {
			return "" // as stemgen judged sizes it did not record
		}
		return fmt.Sprintf("the manifest recorded %s without its size (before format 3), so its values may not fit", old)
	}
	_, oldHi := span(old)
	newLo, _ := span(now)
	switch now.Kind {
	case ShapeFloat:
		if old.Kind == ShapeFloat {
			if oldHi > newLo {
				return "a stored value would lose precision, or fail to decode beyond float32's range"
			}
			return ""
		}
		exact := 16 // bits of an integer a float32 holds exactly (its mantissa has 24)
		if newLo == 64 {
			exact = 32 // float64's mantissa has 53
		}
		if oldHi > exact {
			return fmt.Sprintf("%s holds integers exactly only up to 2^%d, so larger stored values would decode rounded", now, map[int]int{16: 24, 32: 53}[exact])
		}
		return ""
	case ShapeInt:
		switch old.Kind {
		case ShapeFloat:
			return "a stored fraction would fail to decode"
		case ShapeInt:
			if oldHi > newLo {
				return fmt.Sprintf("stored values beyond %s's range would fail to decode", now)
			}
		case ShapeUint:
			if oldHi >= newLo {
				return fmt.Sprintf("stored values beyond %s's range would fail to decode", now)
			}
		}
		return ""
	default: // ShapeUint
		switch old.Kind {
		case ShapeFloat:
			return "a stored fraction or negative value would fail to decode"
		case ShapeInt:
			return "a stored negative value would fail to decode"
		}
		if oldHi > newLo {
			return fmt.Sprintf("stored values beyond %s's range would fail to decode", now)
		}
		return ""
	}
}

// kindChange says why a stored value of one kind does not decode into
// another.
func kindChange(old, now *Shape) string {
	return fmt.Sprintf("a stored %s does not decode into %s", kindNoun(old), now)
}

func kindNoun(s *Shape) string {
	switch s.Kind {
	case ShapeBool:
		return "bool"
	case ShapeString:
		return "string"
	case ShapeInt, ShapeUint, ShapeFloat:
		return "number"
	case ShapeBytes:
		return "base64 string"
	case ShapeSlice, ShapeArray:
		return "array"
	case ShapeMap, ShapeStruct:
		return "object"
	case ShapeTuple:
		return "tuple"
	}
	return "value"
}
