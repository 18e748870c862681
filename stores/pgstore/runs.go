package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

// CreateRuns inserts the runs with one INSERT ... ON CONFLICT DO NOTHING,
// which also records each new run's first execution, and reads back every
// requested ID, both in one implicit transaction (one round trip). Runs that
// already existed are reported with Created false. A run with a Lease goes
// in leased, as a claim would leave it (see createSQL), and wakes no
// claimer.
//
// A call with a run that carries a start policy, an event or a start key
// runs in a transaction of its own instead, its runs one after another
// under the locks that start.go describes.
func (s *Store) CreateRuns(ctx context.Context, runs []storage.NewRun) ([]storage.CreateResult, error) {
	const op = "create runs"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := storage.ValidateNewRuns(runs); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if len(runs) == 0 {
		return []storage.CreateResult{}, nil
	}
	if carriesPolicy(runs) {
		var (
			out   []storage.CreateResult
			ready bool
		)
		err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
			out, ready, err = s.createIn(ctx, tx, runs)
			return err
		})
		if err != nil {
			return nil, s.wrap(op, err)
		}
		if ready {
			s.poke()
		}
		return out, nil
	}
	// Creations ride with the checkpoint writers' next batch, with every
	// other creation queued by then: callers starting runs one at a time
	// share commits.
	call := &ckptCall{create: &createCall{runs: runs}, done: make(chan struct{})}
	if _, err := s.submit(ctx, call); err != nil {
		return nil, err
	}
	out := call.create.out
	if createdReady(out) {
		s.poke()
	}
	return out, nil
}

// createdReady reports whether out has a run created to be claimed: one
// not created leased, which is its owner's to execute.
func createdReady(out []storage.CreateResult) bool {
	for _, r := range out {
		if r.Created && r.Run.Status != storage.StatusRunning {
			return true
		}
	}
	return false
}

// GetRun returns a run's record, with its search attributes, or
// ErrRunNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (storage.RunRecord, error) {
	const op = "get run"
	if err := s.check(op); err != nil {
		return storage.RunRecord{}, err
	}
	rec, err := scanRun(s.pool.QueryRow(ctx, s.q.getRun, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.RunRecord{}, fmt.Errorf("pgstore: %s %q: %w", op, id, storage.ErrRunNotFound)
	}
	if err != nil {
		return storage.RunRecord{}, s.wrap(op, err)
	}
	return rec, nil
}

// ListRuns returns a page of runs in ID order or in creation order
// (storage.OrderCreated: by creation time, then ID), ascending or
// descending, each with its search attributes. The statement names only
// the filters the query sets, so each shape keeps an index-friendly plan:
// a walk of the order, forwards or backwards, in an index that ends in
// it, stopped at the page's end. In ID order that is the workflow's, the
// status's, the parent's or the primary key; in creation order
// runs_workflow_created_idx, runs_status_created_idx or
// runs_created_idx. An ID prefix and the cursor bound the walk: the
// prefix is a range of the ID order when the ID column sorts byte for
// byte (see idRange), a filter otherwise; the cursor of the creation
// order is a row comparison of (created_at, id). The creation range is a
// filter on the runs the walk reaches, as the contract says, and so is
// TopLevel (an empty parent_id).
//
// With attribute filters (q.Where), the first filter's name and value
// drive the listing through the index of its type in run_attrs
// (run_attrs_str_idx and the others), joined to each run it finds: an
// equality is a range of that index already in creation order, so a
// page in creation order is a walk of it, the cursor in its index
// condition, with no sort. A range of numbers or times, a prefix, and any
// filter in ID order read the matches of the filter's range and sort
// them (the matches, not every run). Every further filter is an EXISTS of
// the run's row of its name, which the planner joins as it finds
// cheapest: a probe of run_attrs_pkey for each run the walk finds, or a
// read of that filter's own range; the run's own filters are tested on
// the runs the walk joins.
//
// Each listing is planned with its values (see Store.planListings): which
// index to walk, and whether to walk one, depends on how many runs the
// values pass, which a generic plan can only guess.
func (s *Store) ListRuns(ctx context.Context, q storage.ListRunsQuery) (storage.RunPage, error) {
	const op = "list runs"
	if err := s.check(op); err != nil {
		return storage.RunPage{}, err
	}
	if err := q.Validate(); err != nil {
		return storage.RunPage{}, fmt.Errorf("pgstore: %w", err)
	}
	limit := q.PageSize()
	sql, args := s.listRunsSQL(q)
	if s.planListings {
		args = append([]any{pgx.QueryExecModeCacheDescribe}, args...)
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return storage.RunPage{}, s.wrap(op, err)
	}
	var page storage.RunPage
	for rows.Next() {
		rec, err := scanRun(rows)
		if err != nil {
			rows.Close()
			return storage.RunPage{}, s.wrap(op, err)
		}
		page.Runs = append(page.Runs, rec)
	}
	if err := rows.Err(); err != nil {
		return storage.RunPage{}, s.wrap(op, err)
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.Next = q.NextCursor(&page.Runs[limit-1])
	}
	return page, nil
}

// listRunsSQL is ListRuns's statement for the query and its arguments: the
// filters the query sets, the cursor, the order and a limit of one more run
// than the page holds, which tells whether another page follows. A query
// without attribute filters reads the runs table alone, its columns named
// without an alias (the statements of the ID order are as they were
// before attributes); one with them reads run_attrs a joined to runs r.
func (s *Store) listRunsSQL(q storage.ListRunsQuery) (string, []any) {
	var (
		where []string
		args  []any
	)
	param := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	add := func(cond string, v any) {
		where = append(where, strings.ReplaceAll(cond, "$?", param(v)))
	}
	joined := len(q.Where) > 0
	// col names a column of the run: r's when joined.
	col := func(name string) string {
		if joined {
			return "r." + name
		}
		return name
	}
	if joined {
		where = append(where, attrCond("a", q.Where[0], param))
	}
	if q.Workflow != "" {
		add(col("workflow")+" = $?", q.Workflow)
	}
	if q.Status != "" {
		add(col("status")+" = $?", string(q.Status))
	}
	if q.ParentID != "" {
		// Planned with its value (a parent ID is never empty), the
		// condition implies the predicate of the partial index of
		// children, runs_parent_idx. Stating the predicate too would
		// make the planner count it as a second filter and expect a
		// parent's children to be a few, which it would sort.
		add(col("parent_id")+" = $?", q.ParentID)
	}
	if q.TopLevel {
		where = append(where, col("parent_id")+" = ''")
	}
	if q.Queue != "" {
		add(col("queue")+" = $?", q.Queue)
	}
	if len(q.Versions) > 0 {
		vs := make([]int32, len(q.Versions))
		for i, v := range q.Versions {
			vs[i] = int32(v)
		}
		add(col("version")+" = ANY($?::int[])", vs)
	}
	if q.IDPrefix != "" {
		// The range, when the collation makes it the prefix's, is both
		// the filter and the index scan's bounds. starts_with is not
		// added to it: the planner would take it for one more filter
		// that passes a few of the range's runs, and sort the few it
		// expects rather than walk the index. Without an upper bound,
		// or under another collation, starts_with decides.
		id := col("id")
		lo, hi, bounded := s.idRange(q.IDPrefix)
		switch {
		case !bounded:
			add("starts_with("+id+", $?)", q.IDPrefix)
		case hi == "":
			add("starts_with("+id+", $?) AND "+id+" >= $?", lo)
		default:
			add(id+" >= $?", lo)
			add(id+" < $?", hi)
		}
	}
	// The creation time and ID of the order: the driving attribute's
	// copies when joined, so that they are in its index's condition.
	created, id := "created_at", "id"
	if joined {
		created, id = "a.created_at", "a.run_id"
	}
	if !q.CreatedFrom.IsZero() {
		add(created+" >= $?", storage.CeilMicro(q.CreatedFrom))
	}
	if !q.CreatedTo.IsZero() {
		add(created+" < $?", storage.CeilMicro(q.CreatedTo))
	}
	for i, f := range q.Where[min(1, len(q.Where)):] {
		b := "b" + strconv.Itoa(i+1)
		where = append(where, `EXISTS (SELECT 1 FROM `+s.schema+`.run_attrs `+b+` WHERE `+b+`.run_id = r.id AND `+attrCond(b, f, param)+`)`)
	}
	cmp, desc := ">", ""
	if q.Descending {
		cmp, desc = "<", " DESC"
	}
	var order string
	if q.Order == storage.OrderCreated {
		order = created + desc + ", " + id + desc
		if at, after, ok := q.CreatedAfter(); ok {
			where = append(where, "("+created+", "+id+") "+cmp+" ("+param(at.Truncate(time.Microsecond))+"::timestamptz, "+param(after)+"::text)")
		}
	} else {
		order = id + desc
		if q.After != "" {
			add(id+" "+cmp+" $?", q.After)
		}
	}
	var sql string
	if joined {
		sql = `SELECT ` + cols("r") + ` FROM ` + s.schema + `.run_attrs a JOIN ` + s.schema + `.runs r ON r.id = a.run_id`
	} else {
		sql = `SELECT ` + cols("") + ` FROM ` + s.schema + `.runs`
	}
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, " AND ")
	}
	sql += ` ORDER BY ` + order + ` LIMIT ` + param(q.PageSize()+1)
	return sql, args
}

// attrCond is the condition on the run_attrs row x of passing filter f:
// the row of f's name holds a value of f's type that compares so. A
// string's prefix is a range of the C collation's (byte) order, as an ID
// prefix is (prefixEnd). A time with a fraction of a microsecond compares
// as the stored times, kept to the microsecond, compare to it.
func attrCond(x string, f storage.AttrFilter, param func(any) string) string {
	cond := x + ".name = " + param(f.Value.Name) + "::text AND "
	v := f.Value
	switch v.Type {
	case storage.AttrString:
		if f.Op != storage.OpPrefix {
			return cond + x + ".str = " + param(v.Str) + "::text"
		}
		lo := param(v.Str)
		if hi, ok := prefixEnd(v.Str); ok {
			return cond + x + ".str >= " + lo + "::text AND " + x + ".str < " + param(hi) + "::text"
		}
		return cond + x + ".str >= " + lo + "::text AND starts_with(" + x + ".str, " + lo + "::text)"
	case storage.AttrNumber:
		return cond + x + ".num " + string(f.Op) + " " + param(v.Num) + "::float8"
	case storage.AttrTime:
		op, at := string(f.Op), v.Time.Truncate(time.Microsecond)
		if !at.Equal(v.Time) {
			switch f.Op {
			case storage.OpEq:
				return cond + "false"
			case storage.OpLt, storage.OpLe:
				op = "<="
			default:
				op = ">"
			}
		}
		return cond + x + ".at " + op + " " + param(at) + "::timestamptz"
	case storage.AttrBool:
		return cond + x + ".flag = " + param(v.Bool) + "::boolean"
	}
	return cond + "false"
}

// CountRuns counts the runs in each status, of every workflow or of
// q.Workflow, with one aggregate. A workflow's runs are counted through
// runs_workflow_id_idx, which carries the status (migration 008): an
// index-only scan of the workflow's entries, which reads no row on pages
// vacuum marked all-visible. Every run is counted through
// runs_status_id_idx likewise, or by a read of the whole table, whichever
// the planner finds cheaper: both pass every run.
func (s *Store) CountRuns(ctx context.Context, q storage.CountRunsQuery) (storage.RunCounts, error) {
	const op = "count runs"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	var (
		rows pgx.Rows
		err  error
	)
	if q.Workflow == "" {
		rows, err = s.pool.Query(ctx, s.q.countRuns)
	} else {
		rows, err = s.pool.Query(ctx, s.q.countRunsOf, q.Workflow)
	}
	if err != nil {
		return nil, s.wrap(op, err)
	}
	counts := storage.RunCounts{}
	var (
		status string
		n      int64
	)
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		counts[storage.RunStatus(status)] = n
		return nil
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return counts, nil
}

// idRange returns the range of IDs that begin with prefix, [lo, hi) with
// hi "" for no upper bound, and bounded false when the ID column's
// collation does not sort byte for byte: the range is then not the
// prefix's, and only starts_with can find its runs. With both bounds the
// range holds exactly the IDs with the prefix: IDs are valid UTF-8, which
// sorts byte for byte as its code points do.
func (s *Store) idRange(prefix string) (lo, hi string, bounded bool) {
	if !s.bytewiseIDs.Load() {
		return "", "", false
	}
	hi, _ = prefixEnd(prefix)
	return prefix, hi, true
}

// prefixEnd is storage.PrefixEnd made valid UTF-8, which a text parameter
// must be: the least valid string greater, byte for byte, than every valid
// string that begins with prefix (itself valid), and false when there is
// none (every rune is U+10FFFF). As UTF-8 sorts runes in code point order
// byte for byte, that is prefix with its last rune below U+10FFFF replaced
// by the next valid rune (after U+D7FF: U+E000) and the runes after it
// dropped.
func prefixEnd(prefix string) (string, bool) {
	if end, ok := storage.PrefixEnd(prefix); ok && utf8.ValidString(end) {
		return end, true
	}
	for p := prefix; p != ""; {
		r, n := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-n]
		switch {
		case r == utf8.MaxRune || r == utf8.RuneError && n == 1:
			continue
		case r == 0xD7FF:
			return p + string(rune(0xE000)), true
		default:
			return p + string(r+1), true
		}
	}
	return "", false
}

// idCollation is the statement that reads how the runs' ID column sorts:
// its collation's provider ('c' libc, 'i' ICU, 'b' builtin) and locale,
// the database's when the column has the default collation, and the
// database's encoding. datlocprovider is read through to_jsonb because
// servers before Postgres 15 have no such column (their default collation
// is libc's). No row: the schema has no runs table yet.
const idCollation = `SELECT
	CASE WHEN c.collprovider = 'd' THEN coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') ELSE c.collprovider::text END,
	coalesce(CASE WHEN c.collprovider = 'd' THEN d.datcollate::text ELSE c.collcollate::text END, ''),
	pg_encoding_to_char(d.encoding)::text
FROM pg_attribute a
JOIN pg_collation c ON c.oid = a.attcollation
JOIN pg_database d ON d.datname = current_database()
WHERE a.attrelid = to_regclass($1) AND a.attname = 'id'`

// readIDCollation finds out, once the schema holds the runs table, whether
// the ID column sorts byte for byte, as ListRuns's prefix ranges need
// (idRange). A schema without the table yet (Options.SkipMigrate) keeps
// the prefix a filter until Migrate creates it.
func (s *Store) readIDCollation(ctx context.Context) error {
	var provider, locale, encoding string
	err := s.pool.QueryRow(ctx, idCollation, s.schema+".runs").Scan(&provider, &locale, &encoding)
	if errors.Is(err, pgx.ErrNoRows) {
		s.bytewiseIDs.Store(false)
		return nil
	}
	if err != nil {
		return s.wrap("read the collation of runs.id in schema "+s.schemaName, err)
	}
	s.bytewiseIDs.Store(bytewise(provider, locale, encoding))
	return nil
}

// bytewise reports whether a collation sorts UTF-8 text byte for byte: the
// builtin provider's (Postgres 17: code point order), and libc's C and
// POSIX, and C.UTF-8 (code point order), in a UTF-8 database. ICU's never
// do, nor any other libc locale.
func bytewise(provider, locale, encoding string) bool {
	if encoding != "UTF8" {
		return false
	}
	switch provider {
	case "b":
		return true
	case "c":
		switch strings.ToLower(locale) {
		case "c", "posix", "c.utf-8", "c.utf8":
			return true
		}
	}
	return false
}
