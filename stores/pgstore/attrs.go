package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stemflow/stem/storage"
)

// Search attributes (storage.Attr) are kept twice, in one change: in
// the runs.attrs column of their run, a JSON object that every statement
// reading the run returns with it (encodeAttrs, decodeAttrs), and as rows
// of run_attrs, one per run and name, the value in the column of its
// type, which the listings find runs by (migration 016). A run's creation
// writes both in the creation statement (createAttrs, createBoth: the
// variants of a create that carries some, so a create without attributes
// sends the statement it always sent); a checkpoint that carries some
// merges them by one more statement after the checkpoint statement, in
// its transaction and round trip (setAttrs), for the checkpoints that
// statement wrote, as a reply or stream writes go (see interact.go); a
// checkpoint without attributes sends nothing more. A replacement and a
// debounce window's join set the run's column anew, delete its rows and
// write the new ones (dropFamily or deleteAttrs, then insertAttrs); Purge
// deletes the rows with the run. Restart and ContinueAsNew leave both.

// attrLimit is the constraint named by the error refuse_attributes raises
// when a checkpoint's merge would leave a run more attributes than
// storage.MaxAttributes.
const attrLimit = "run_attrs_limit"

// attrLimitError is err as storage.ErrInvalidArgument when it is the
// refusal of a merge of too many attributes, and nil otherwise.
func attrLimitError(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.ConstraintName != attrLimit {
		return nil
	}
	return fmt.Errorf("%w: set attributes: %s", storage.ErrInvalidArgument, pe.Message)
}

// attrRows accumulates search attributes as the parallel arrays the
// statements unnest (attrsFrom): run ID, name, and the value of the
// attribute's type, NULL in the other columns.
type attrRows struct {
	runs, names []string
	strs        []*string
	nums        []*float64
	ats         []*time.Time
	flags       []*bool
}

// add appends the attributes of run, normalized.
func (r *attrRows) add(run string, attrs []storage.Attr) {
	for _, a := range storage.NormalizeAttrs(attrs) {
		r.runs, r.names = append(r.runs, run), append(r.names, a.Name)
		var (
			str  *string
			num  *float64
			at   *time.Time
			flag *bool
		)
		switch a.Type {
		case storage.AttrString:
			str = &a.Str
		case storage.AttrNumber:
			num = &a.Num
		case storage.AttrTime:
			at = &a.Time
		case storage.AttrBool:
			flag = &a.Bool
		}
		r.strs, r.nums, r.ats, r.flags = append(r.strs, str), append(r.nums, num), append(r.ats, at), append(r.flags, flag)
	}
}

// args are the arrays, in attrsFrom's order.
func (r *attrRows) args() []any {
	return []any{r.runs, r.names, r.strs, r.nums, r.ats, r.flags}
}

// attrJSON is one attribute in runs.attrs, under its name: [type,
// value], the type "s" (string), "n" (number, its value a string of the
// shortest text that reads back the same float64, so that nothing on the
// way rounds it), "t" (time, in Unix microseconds) or "b" (bool).
type attrJSON [2]json.RawMessage

// encodeAttrs returns attrs, normalized, as the JSON text of runs.attrs,
// nil for none.
func encodeAttrs(attrs []storage.Attr) *string {
	if len(attrs) == 0 {
		return nil
	}
	obj := make(map[string][2]any, len(attrs))
	for _, a := range storage.NormalizeAttrs(attrs) {
		switch a.Type {
		case storage.AttrString:
			obj[a.Name] = [2]any{"s", a.Str}
		case storage.AttrNumber:
			obj[a.Name] = [2]any{"n", strconv.FormatFloat(a.Num, 'g', -1, 64)}
		case storage.AttrTime:
			obj[a.Name] = [2]any{"t", a.Time.UnixMicro()}
		case storage.AttrBool:
			obj[a.Name] = [2]any{"b", a.Bool}
		}
	}
	b, _ := json.Marshal(obj) // strings, a number, bools: always encodes
	str := string(b)
	return &str
}

// decodeAttrs reads the runs.attrs column: the attributes sorted by name,
// nil for NULL or none.
func decodeAttrs(text *string) ([]storage.Attr, error) {
	if text == nil {
		return nil, nil
	}
	var obj map[string]attrJSON
	if err := json.Unmarshal([]byte(*text), &obj); err != nil {
		return nil, fmt.Errorf("decode attributes: %w", err)
	}
	if len(obj) == 0 {
		return nil, nil
	}
	out := make([]storage.Attr, 0, len(obj))
	for name, v := range obj {
		a := storage.Attr{Name: name}
		var (
			typ string
			err error
		)
		if err = json.Unmarshal(v[0], &typ); err == nil {
			switch typ {
			case "s":
				a.Type, err = storage.AttrString, json.Unmarshal(v[1], &a.Str)
			case "n":
				var text string
				if err = json.Unmarshal(v[1], &text); err == nil {
					a.Type = storage.AttrNumber
					a.Num, err = strconv.ParseFloat(text, 64)
				}
			case "t":
				var us int64
				if err = json.Unmarshal(v[1], &us); err == nil {
					a.Type, a.Time = storage.AttrTime, time.UnixMicro(us).UTC()
				}
			case "b":
				a.Type, err = storage.AttrBool, json.Unmarshal(v[1], &a.Bool)
			default:
				err = fmt.Errorf("unknown type %q", typ)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("decode attribute %s: %w", name, err)
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b storage.Attr) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// setAttrsArgs are the setAttrs statement's arguments for calls, each a
// checkpoint that carries attributes; known says the caller knows each
// call's checkpoint was written.
func setAttrsArgs(calls []*ckptCall, known bool) []any {
	var (
		runs = make([]string, len(calls))
		keys = make([]string, len(calls))
		objs = make([]*string, len(calls))
		rows attrRows
	)
	for i, c := range calls {
		runs[i], keys[i], objs[i] = c.req.Lease.RunID, c.req.Checkpoint.Key, encodeAttrs(c.req.Attributes)
		rows.add(c.req.Lease.RunID, c.req.Attributes)
	}
	args := append([]any{known, runs, keys, objs}, rows.args()...)
	return append(args, int32(storage.MaxAttributes))
}

// attrsIn merges call's attributes in tx, after its checkpoint was written
// in tx.
func (s *Store) attrsIn(ctx context.Context, tx pgx.Tx, call *ckptCall) error {
	_, err := tx.Exec(ctx, s.q.setAttrs, setAttrsArgs([]*ckptCall{call}, true)...)
	return err
}
