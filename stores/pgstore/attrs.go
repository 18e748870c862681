package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stemflow/stem/storage"
)

// Search attributes (storage.Attr) are rows of run_attrs, one per run and
// name, the value in the column of its type (migration 016). A run's
// creation writes its attributes in the creation statement (createAttrs,
// createBoth: the variants of a create that carries some, so a create
// without attributes sends the statement it always sent); a checkpoint
// that carries some merges them by one more statement after the
// checkpoint statement, in its transaction and round trip (setAttrs),
// for the checkpoints that statement wrote, as a reply or stream writes
// go (see interact.go); a checkpoint without attributes sends nothing
// more. A replacement deletes the replaced run's rows with everything
// else it owns (dropFamily) and writes the new run's (insertAttrs); Purge
// deletes a run's with the run. Restart and ContinueAsNew leave them.
//
// The statements that return runs read each run's attributes by a
// sub-select of the same statement (attrsOf), decoded by scanRunAttrs.

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

// decodeAttrs reads a run's attributes as attrsOf returns them: nil for
// NULL (none).
func decodeAttrs(js []byte) ([]storage.Attr, error) {
	if js == nil {
		return nil, nil
	}
	var rows [][5]json.RawMessage
	if err := json.Unmarshal(js, &rows); err != nil {
		return nil, fmt.Errorf("decode attributes: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	out := make([]storage.Attr, len(rows))
	for i, row := range rows {
		a := &out[i]
		if err := json.Unmarshal(row[0], &a.Name); err != nil {
			return nil, fmt.Errorf("decode attributes: name: %w", err)
		}
		null := func(m json.RawMessage) bool { return string(m) == "null" }
		var err error
		switch {
		case !null(row[1]):
			a.Type, err = storage.AttrString, json.Unmarshal(row[1], &a.Str)
		case !null(row[2]):
			a.Type, err = storage.AttrNumber, json.Unmarshal(row[2], &a.Num)
		case !null(row[3]):
			var us int64
			a.Type, err = storage.AttrTime, json.Unmarshal(row[3], &us)
			a.Time = time.UnixMicro(us).UTC()
		case !null(row[4]):
			a.Type, err = storage.AttrBool, json.Unmarshal(row[4], &a.Bool)
		default:
			err = errors.New("no value")
		}
		if err != nil {
			return nil, fmt.Errorf("decode attribute %s: %w", a.Name, err)
		}
	}
	slices.SortFunc(out, func(a, b storage.Attr) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// scanRunAttrs reads the runColumns of one row, then the run's attributes
// (attrsOf), then extra destinations.
func scanRunAttrs(row scanner, extra ...any) (storage.RunRecord, error) {
	var js []byte
	rec, err := scanRun(row, append([]any{&js}, extra...)...)
	if err != nil {
		return storage.RunRecord{}, err
	}
	if rec.Attributes, err = decodeAttrs(js); err != nil {
		return storage.RunRecord{}, err
	}
	return rec, nil
}

// setAttrsArgs are the setAttrs statement's arguments for calls, each a
// checkpoint that carries attributes; known says the caller knows each
// call's checkpoint was written.
func setAttrsArgs(calls []*ckptCall, known bool) []any {
	var (
		runs = make([]string, len(calls))
		keys = make([]string, len(calls))
		rows attrRows
	)
	for i, c := range calls {
		runs[i], keys[i] = c.req.Lease.RunID, c.req.Checkpoint.Key
		rows.add(c.req.Lease.RunID, c.req.Attributes)
	}
	args := append([]any{known, runs, keys}, rows.args()...)
	return append(args, int32(storage.MaxAttributes))
}

// attrsIn merges call's attributes in tx, after its checkpoint was written
// in tx.
func (s *Store) attrsIn(ctx context.Context, tx pgx.Tx, call *ckptCall) error {
	_, err := tx.Exec(ctx, s.q.setAttrs, setAttrsArgs([]*ckptCall{call}, true)...)
	return err
}
