package sqlitestore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// A run's search attributes live in run_attrs (migration 014), one row
// per name, the value in the column of its type; the rows carry the run's
// creation time and ID, so that each type's index lists the runs of one
// name and value in creation order. They are written by a create
// (insertAttrs), replaced by a debounced create that joins the run
// (replaceAttrs) and merged by a checkpoint that sets some (mergeAttrs);
// Restart and ContinueAsNew leave them; deleteRuns deletes them with
// their run.

// insertAttrs writes the attributes of the run ref, whose ID is id and
// creation microsecond createdUS (runs.created_us), in one statement,
// replacing the values of names it has.
func (w *wtx) insertAttrs(ref int64, id string, createdUS int64, attrs []storage.Attr) error {
	if len(attrs) == 0 {
		return nil
	}
	attrs = storage.NormalizeAttrs(attrs)
	args := make([]any, 0, 3+5*len(attrs))
	args = append(args, ref, id, createdUS)
	for _, a := range attrs {
		str, num, tim, b := attrValue(a)
		args = append(args, a.Name, str, num, tim, b)
	}
	_, err := w.exec(insertAttrsSQL[len(attrs)], args...)
	return err
}

// insertAttrsSQL holds insertAttrs(n) for each n a write may have.
var insertAttrsSQL = func() (stmts [storage.MaxAttributes + 1]string) {
	for n := range stmts {
		stmts[n] = insertAttrs(n)
	}
	return stmts
}()

// insertAttrs returns the statement that writes n attributes of run ?1
// (its ref), whose ID is ?2 and creation microsecond ?3: each a name and
// its value's four columns (one not NULL), from ?4 on. A name the run
// has takes the new value.
func insertAttrs(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO run_attrs (run_ref, name, str_value, num_value, time_value, bool_value, created_us, run_id) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(`, `)
		}
		p := 4 + 5*i
		fmt.Fprintf(&b, `(?1, ?%d, ?%d, ?%d, ?%d, ?%d, ?3, ?2)`, p, p+1, p+2, p+3, p+4)
	}
	b.WriteString(` ON CONFLICT (run_ref, name) DO UPDATE SET str_value = excluded.str_value, num_value = excluded.num_value,
		time_value = excluded.time_value, bool_value = excluded.bool_value`)
	return b.String()
}

// replaceAttrs gives the run ref the attributes attrs in place of those
// it has: a debounce window's run takes the last start's.
func (w *wtx) replaceAttrs(ref int64, id string, createdUS int64, attrs []storage.Attr) error {
	if _, err := w.exec(`DELETE FROM run_attrs WHERE run_ref = ?1`, ref); err != nil {
		return err
	}
	return w.insertAttrs(ref, id, createdUS, attrs)
}

// mergeAttrs merges set into the attributes of the run ref, as
// storage.MergeAttrs does: a name set replaces its value (and type), a
// new one is added. A merge that would leave the run more than
// storage.MaxAttributes is ErrInvalidArgument, with nothing changed.
func (w *wtx) mergeAttrs(ref int64, set []storage.Attr) error {
	if len(set) == 0 {
		return nil
	}
	var have []string
	var id string
	var createdUS int64
	if err := w.query(`SELECT r.id, r.created_us, a.name FROM runs r LEFT JOIN run_attrs a ON a.run_ref = r.ref WHERE r.ref = ?1`, func(r row) error {
		id, createdUS = r.str(0), r.int64(1)
		if !r.isNull(2) {
			have = append(have, r.str(2))
		}
		return nil
	}, ref); err != nil {
		return err
	}
	n := len(have)
	for _, a := range set {
		if !slices.Contains(have, a.Name) {
			n++
		}
	}
	if n > storage.MaxAttributes {
		return fmt.Errorf("run %q: set attributes: %w: the run would hold %d attributes, over the limit of %d",
			id, storage.ErrInvalidArgument, n, storage.MaxAttributes)
	}
	return w.insertAttrs(ref, id, createdUS, set)
}

// attrValue returns the columns str_value, num_value, time_value and
// bool_value that hold a's value: the one of its type set, the others NULL.
func attrValue(a storage.Attr) (str, num, tim, b any) {
	switch a.Type {
	case storage.AttrString:
		return a.Str, nil, nil, nil
	case storage.AttrNumber:
		return nil, a.Num, nil, nil
	case storage.AttrTime:
		return nil, nil, a.Time.UnixMicro(), nil
	default:
		return nil, nil, nil, a.Bool
	}
}

// attrsCol is the column, in runCols, that holds a run's attributes: NULL
// when it has none, else each in name order as attrText writes it. One
// statement thus reads a page of runs with their attributes, in one state
// of the database, a seek of run_attrs per run. It is text of our own
// making rather than JSON: decoding JSON added about 0.4 ms of CPU to a
// page of 100 runs of two attributes each (measured), this a fraction of
// that.
const attrsCol = `(SELECT group_concat(` + attrText + `, '') FROM run_attrs WHERE run_ref = r.ref)`

// attrText renders a row of run_attrs as decodeAttrs reads it: the name's
// length in bytes, a colon, the name, the type (s, n, t or b), the
// value's length in bytes, a colon and the value: a string as it is, a
// number with 17 significant digits (which strconv.ParseFloat reads back
// to the same float64), a time in Unix microseconds, a bool as 0 or 1.
const attrText = `octet_length(name) || ':' || name || CASE
		WHEN str_value IS NOT NULL THEN 's' || octet_length(str_value) || ':' || str_value
		WHEN num_value IS NOT NULL THEN 'n' || octet_length(printf('%!.17g', num_value)) || ':' || printf('%!.17g', num_value)
		WHEN time_value IS NOT NULL THEN 't' || octet_length(time_value) || ':' || time_value
		ELSE 'b' || octet_length(bool_value) || ':' || bool_value END`

// decodeAttrs reads the attributes column (attrsCol) at i: nil when NULL.
func decodeAttrs(r row, i int) ([]storage.Attr, error) {
	if r.isNull(i) {
		return nil, nil
	}
	text := r.str(i)
	var attrs []storage.Attr
	for text != "" {
		name, rest, ok := cutCounted(text)
		if !ok || rest == "" {
			return nil, fmt.Errorf("stored attributes: malformed at %q", text)
		}
		typ := rest[0]
		value, rest, ok := cutCounted(rest[1:])
		if !ok {
			return nil, fmt.Errorf("stored attribute %s: malformed value", name)
		}
		text = rest
		a := storage.Attr{Name: name}
		var err error
		switch typ {
		case 's':
			a.Type, a.Str = storage.AttrString, value
		case 'n':
			a.Type = storage.AttrNumber
			a.Num, err = strconv.ParseFloat(value, 64)
		case 't':
			var us int64
			us, err = strconv.ParseInt(value, 10, 64)
			a.Type, a.Time = storage.AttrTime, time.UnixMicro(us).UTC()
		case 'b':
			a.Type, a.Bool = storage.AttrBool, value != "0"
		default:
			err = fmt.Errorf("unknown type %q", typ)
		}
		if err != nil {
			return nil, fmt.Errorf("stored attribute %s: %w", name, err)
		}
		attrs = append(attrs, a)
	}
	// In name order already, as the rows are read; sorted anyway, which
	// costs a pass over them, so the order does not rest on the plan.
	slices.SortFunc(attrs, func(a, b storage.Attr) int { return strings.Compare(a.Name, b.Name) })
	return attrs, nil
}

// cutCounted cuts from s a field written as its length in bytes, a colon
// and its bytes, and returns it and what follows.
func cutCounted(s string) (field, rest string, ok bool) {
	n, after, found := strings.Cut(s, ":")
	size, err := strconv.Atoi(n)
	if !found || err != nil || size < 0 || size > len(after) {
		return "", "", false
	}
	return after[:size], after[size:], true
}

// attrCond is the comparison of an attribute filter's value, as SQL on
// the row of run_attrs of alias t that holds the attribute of its name:
// the value column of the filter's type (NULL, so false, in a row of
// another type) compared to its value, bound by p. A time compares at
// the microsecond, as times are stored: a filter's time finer than that
// is compared as AttrFilter.Match compares it (a stored time never
// equals it, lies below it up to its microsecond, above it from the
// next).
func attrCond(t string, f storage.AttrFilter, p *params) string {
	v := f.Value
	switch v.Type {
	case storage.AttrString:
		col := t + `.str_value`
		if f.Op != storage.OpPrefix {
			return col + ` = ` + p.add(v.Str)
		}
		cond := col + ` >= ` + p.add(v.Str)
		if end, ok := storage.PrefixEnd(v.Str); ok {
			cond += ` AND ` + col + ` < ` + p.add(end)
		}
		return cond
	case storage.AttrNumber:
		return t + `.num_value ` + string(f.Op) + ` ` + p.add(v.Num)
	case storage.AttrTime:
		col := t + `.time_value`
		us := v.Time.Truncate(time.Microsecond)
		q := p.add(us.UnixMicro())
		if v.Time.Equal(us) {
			return col + ` ` + string(f.Op) + ` ` + q
		}
		// A time between two microseconds: those below it are those up
		// to its microsecond (none equals it: see matchesNone).
		switch f.Op {
		case storage.OpLt, storage.OpLe:
			return col + ` <= ` + q
		default:
			return col + ` > ` + q
		}
	default:
		return t + `.bool_value = ` + p.add(v.Bool)
	}
}

// matchesNone reports whether the filter passes no run whatever the runs
// stored: an equality to a time finer than the microsecond, which no
// stored time is.
func matchesNone(f storage.AttrFilter) bool {
	return f.Op == storage.OpEq && f.Value.Type == storage.AttrTime && !f.Value.Time.Equal(f.Value.Time.Truncate(time.Microsecond))
}

// attrIndex is the index of run_attrs that holds the values of type t.
func attrIndex(t storage.AttrType) string {
	switch t {
	case storage.AttrString:
		return "run_attrs_str"
	case storage.AttrNumber:
		return "run_attrs_num"
	case storage.AttrTime:
		return "run_attrs_time"
	}
	return "run_attrs_bool"
}

// params numbers a statement's parameters as they are added.
type params struct{ args []any }

// add binds v to the next parameter and returns its name.
func (p *params) add(v any) string {
	p.args = append(p.args, v)
	return "?" + strconv.Itoa(len(p.args))
}
