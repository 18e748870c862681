package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// How a claim picks its runs.
//
// runs_claim (the default queue's runs) and runs_claim_queue (the other
// queues', by queue first) order each queue's claimable runs by priority
// (highest first), then claim_rank (0: a running run, claimable once its
// lease expired, a recovery; 1: a queued or waiting run), then claim_at.
// Within one (queue, priority, rank) the due runs are one range of the
// index, from the oldest claim_at to now, so a claim reads each range from
// its start and stops at its limit, however many runs wait behind it or
// sleep after now. The priorities are visited one by one, highest first,
// each found by one seek (the next priority below the last), so a claim
// costs a seek per priority that has claimable runs, never a scan of the
// backlog.
//
// A claim of several queues merges them: at each priority, recoveries of
// every queue before ready runs of any, then oldest claim_at first.
//
// An unlimited queue's runs are all admissible: one statement per priority
// reads both ranks at once, up to the claim's limit. A claim of that queue
// alone, the common case, finds the priority in the same statement and
// learns the next one below, so a queue whose runs share one priority is
// claimed from by a single statement. A limited queue's are
// judged one by one by the counts of its places, read in the claim's
// transaction (SQLite has one writer at a time, so no other claim, in this
// process or another, changes them until it commits): the queue's running
// runs (the recoveries' ranges of its claim index), those of each
// partition met, and its starts within the rate period (queue_starts). Recoveries take no new place and are
// never held back. A full queue's ready runs are not read at all; the
// statement that reads a limited queue's ready runs leaves out the
// partitions already full and, when the rate window is full, the runs that
// would start, so they are passed over inside SQLite (one row read each,
// as partition_key and first_claimed_at are not in runs_claim, to keep its
// entries, which every step moves, small) rather than handed to Go.
//
// A claim with a Versions filter leaves out the runs of the versions its
// worker does not run in the same statements, beside the workflows: the
// claim indexes end with each run's workflow and version, so the filter is
// judged on the index entry (see versionIn) and a run passed over takes
// none of the claim's limit. A workflow whose entry lists no version is
// left out of the claim altogether.

// claimCand is a run a claim may lease: its place in the claim's order and
// what a queue's limits judge it by.
type claimCand struct {
	ref       int64
	id        string
	rank      int64 // 0: a recovery, 1: a ready run
	claimAt   int64
	workflow  string
	version   int64
	partition string
	fresh     bool // not claimed since its creation or last Restart: a start
	// logStart is the rate-limited queue whose start this claim is, or "".
	logStart string
}

// before orders candidates as the claim takes them within one priority.
func (a claimCand) before(b claimCand) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if a.claimAt != b.claimAt {
		return a.claimAt < b.claimAt
	}
	if a.workflow != b.workflow {
		return a.workflow < b.workflow
	}
	if a.version != b.version {
		return a.version < b.version
	}
	return a.ref < b.ref
}

// claimCols are the columns scanCand reads.
const claimCols = `ref, id, claim_rank, claim_at, workflow, version, partition_key, first_claimed_at IS NULL`

func scanCand(r row) claimCand {
	return claimCand{ref: r.int64(0), id: r.str(1), rank: r.int64(2), claimAt: r.int64(3),
		workflow: r.str(4), version: r.int64(5), partition: r.str(6), fresh: r.int64(7) != 0}
}

// workflowIn returns the SQL of a workflow IN (...) list whose parameters
// start at ?first, and their arguments: a few workflows one by one, many
// as a JSON list.
func workflowIn(first int, workflows []string) (string, []any) {
	if len(workflows) > 8 {
		b, _ := json.Marshal(workflows) // strings only: cannot fail
		return "SELECT value FROM json_each(?" + strconv.Itoa(first) + ")", []any{string(b)}
	}
	in := ""
	args := make([]any, 0, len(workflows))
	for i, wf := range workflows {
		if i > 0 {
			in += ", "
		}
		in += "?" + strconv.Itoa(first+i)
		args = append(args, wf)
	}
	return in, args
}

// versionIn returns the SQL condition that keeps a claim of workflows to
// the versions its Versions filter allows, whose parameters start at
// ?first, and their arguments: "" when no workflow has an entry. The
// claim indexes hold the version beside the workflow, so the condition is
// judged on each index entry without reading the run's row. A few
// workflows with entries are one CASE over them; many, a JSON list of
// their names and one of their (workflow, version) pairs, each read once
// per statement into a table of its own.
func versionIn(first int, workflows []string, versions map[string][]int) (string, []any) {
	var with []string
	for _, wf := range workflows {
		if _, ok := versions[wf]; ok {
			with = append(with, wf)
		}
	}
	if len(with) == 0 {
		return "", nil
	}
	param := func(i int) string { return "?" + strconv.Itoa(i) }
	if len(with) > 8 {
		pairs := make([][2]any, 0, len(with))
		for _, wf := range with {
			for _, v := range versions[wf] {
				pairs = append(pairs, [2]any{wf, v})
			}
		}
		names, _ := json.Marshal(with) // strings only: cannot fail
		list, _ := json.Marshal(pairs) // strings and ints: cannot fail
		return `(workflow NOT IN (SELECT value FROM json_each(` + param(first) + `))
			OR (workflow, version) IN (SELECT value ->> 0, value ->> 1 FROM json_each(` + param(first+1) + `)))`,
			[]any{string(names), string(list)}
	}
	sql := "CASE workflow"
	var args []any
	for _, wf := range with {
		sql += " WHEN " + param(first+len(args)) + " THEN "
		args = append(args, wf)
		vs := versions[wf]
		if len(vs) == 0 {
			sql += "0"
			continue
		}
		sql += "version IN ("
		for i, v := range vs {
			if i > 0 {
				sql += ", "
			}
			sql += param(first + len(args))
			args = append(args, v)
		}
		sql += ")"
	}
	return sql + " ELSE 1 END", args
}

// claimable returns the workflows of a claim (or NextWake) whose runs the
// Versions filter lets it take: a workflow whose entry lists no version
// goes.
func claimable(workflows []string, versions map[string][]int) []string {
	if len(versions) == 0 {
		return workflows
	}
	out := make([]string, 0, len(workflows))
	for _, wf := range workflows {
		if vs, ok := versions[wf]; !ok || len(vs) > 0 {
			out = append(out, wf)
		}
	}
	return out
}

// claimCache keeps the claim statements last built and what they were
// built for. An engine's claims and NextWakes ask for the same workflows
// and versions each time, and building the statements' text costs more
// than the search of a claim of one run; comparing the request with the
// last costs little.
type claimCache struct {
	mu        sync.Mutex
	workflows []string
	versions  map[string][]int
	cs        *claimStmts // nil: none built, or no workflow claimable
	built     bool
}

// get returns the statements of a claim (or NextWake) of workflows
// filtered by versions, nil when the filter leaves no workflow claimable.
// They are shared, read-only.
func (c *claimCache) get(workflows []string, versions map[string][]int) *claimStmts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.built && slices.Equal(c.workflows, workflows) && maps.EqualFunc(c.versions, versions, slices.Equal[[]int]) {
		return c.cs
	}
	c.cs = nil
	if wfs := claimable(workflows, versions); len(wfs) > 0 {
		cs := newClaimStmts(wfs, versions)
		c.cs = &cs
	}
	c.workflows, c.versions, c.built = slices.Clone(workflows), maps.Clone(versions), true
	for wf, vs := range c.versions {
		c.versions[wf] = slices.Clone(vs)
	}
	return c.cs
}

// claimStmts are the statements a claim (or NextWake) of a set of
// workflows reads the claim indexes with: def those of the default queue,
// which reads runs_claim, other those of any other, which reads
// runs_claim_queue.
type claimStmts struct {
	// wfArgs are the arguments from ?12 on: the workflows', then the
	// versions filter's.
	wfArgs     []any
	def, other claimSQL
}

// claimSQL are the statements of one claim index. Each takes the queue's
// name as ?1 (the default queue's ignore it: their index holds that queue
// alone), the workflows from ?12 and, after them, the versions filter's
// arguments.
type claimSQL struct {
	// top finds a queue's highest priority below ?2 with claimable runs.
	top string
	// all reads an unlimited queue's due runs of one priority, both ranks.
	all string
	// one is top and all in one statement, for a claim of one unlimited
	// queue: a first row of NULL but for its last two columns, the
	// queue's highest priority below ?2 with claimable runs and the next
	// below it (NULL: none), then the refs of that priority's due runs,
	// recoveries first, at most ?4. A queue without claimable runs has no
	// rows. Each rank is its own range of the index, read by a subquery of
	// its own rather than by one claim_rank IN (0, 1), which SQLite reads
	// through a temporary table built at every claim, and no column but
	// the ref is read, so that the runs' rows are not.
	one string
	// page reads a page of a limited queue's due runs of one priority and
	// rank after a cursor (?6, ?7, ?11, ?8: claim_at, workflow, version,
	// ref, in the index's order), leaving out full partitions and, with
	// ?9, starts.
	page string
	// first reads the earliest claim_at of one priority and rank.
	first string
	// running counts the running runs of one priority: its recoveries'
	// range, expired or not.
	running string
	// partitions reads their partition keys.
	partitions string
}

// newClaimStmts returns the statements of a claim of workflows, none of
// them excluded by versions (see claimable), filtered by versions.
func newClaimStmts(workflows []string, versions map[string][]int) claimStmts {
	in, args := workflowIn(12, workflows)
	wf := `workflow IN (` + in + `)`
	if vin, vargs := versionIn(12+len(args), workflows, versions); vin != "" {
		wf += ` AND ` + vin
		args = append(args, vargs...)
	}
	return claimStmts{
		wfArgs: args,
		def:    newClaimSQL("runs_claim", "queue = 'default'", wf),
		other:  newClaimSQL("runs_claim_queue", "queue = ?1 AND queue <> 'default'", wf),
	}
}

// newClaimSQL returns the statements that read index, whose runs the
// condition queue names, of the runs the condition wf keeps (their
// workflows and versions).
func newClaimSQL(index, queue, wf string) claimSQL {
	from := ` FROM runs INDEXED BY ` + index + ` WHERE ` + queue + ` AND `
	below := func(p string) string {
		return `SELECT priority` + from + `priority < ` + p + ` AND claim_at IS NOT NULL ORDER BY priority DESC LIMIT 1`
	}
	due := func(p string) string {
		return from + `priority = ` + p + ` AND claim_rank IN (0, 1) AND claim_at <= ?3
			AND ` + wf + ` ORDER BY claim_rank, claim_at LIMIT ?4`
	}
	rank := func(r string) string {
		return `SELECT * FROM (SELECT ref, NULL, NULL` + from + `priority = (SELECT p FROM level) AND claim_rank = ` + r + `
			AND claim_at <= ?3 AND ` + wf + ` ORDER BY claim_at LIMIT ?4)`
	}
	return claimSQL{
		top: below("?2"),
		all: `SELECT ` + claimCols + due("?2"),
		one: `WITH level (p) AS (` + below("?2") + `)
			SELECT NULL, p, (` + below("level.p") + `) FROM level
			UNION ALL ` + rank("0") + `
			UNION ALL ` + rank("1") + `
			LIMIT ?4 + 1`,
		page: `SELECT ` + claimCols + from + `priority = ?2 AND claim_rank = ?5 AND (claim_at, workflow, version, ref) > (?6, ?7, ?11, ?8) AND claim_at <= ?3
			AND (?9 = 0 OR first_claimed_at IS NOT NULL) AND partition_key NOT IN (SELECT value FROM json_each(?10))
			AND ` + wf + ` ORDER BY claim_at, workflow, version, ref LIMIT ?4`,
		running:    `SELECT count(*)` + from + `priority = ?2 AND claim_rank = 0 AND claim_at IS NOT NULL`,
		partitions: `SELECT partition_key` + from + `priority = ?2 AND claim_rank = 0 AND claim_at IS NOT NULL`,
		first: `SELECT claim_at` + from + `priority = ?2 AND claim_rank = ?5 AND claim_at IS NOT NULL
			AND ` + wf + ` ORDER BY claim_at LIMIT 1`,
	}
}

// of returns the statements of queue's claim index.
func (cs *claimStmts) of(queue string) *claimSQL {
	if queue == storage.DefaultQueue {
		return &cs.def
	}
	return &cs.other
}

// args returns the statement's arguments: the eleven fixed ones, then the
// workflows and the versions filter's.
func (cs *claimStmts) args(fixed ...any) []any {
	a := make([]any, 11, 11+len(cs.wfArgs))
	copy(a, fixed)
	return append(a, cs.wfArgs...)
}

// topPriority finds queue's highest priority below below that has
// claimable runs.
func (cs *claimStmts) topPriority(c *conn, queue string, below int64) (int64, bool, error) {
	var p int64
	found, err := c.queryRow(cs.of(queue).top, func(r row) { p = r.int64(0) }, cs.args(queue, below)...)
	return p, found, err
}

// pickUnlimited is pick for a claim of one queue without limits, the
// common case: one statement per priority level read, which in a queue of
// one level is one statement in all. The runs it returns have their ref
// alone.
func (w *wtx) pickUnlimited(cs *claimStmts, queue string, limit int, now int64) ([]claimCand, error) {
	var out []claimCand
	stmt := cs.of(queue).one
	below := int64(math.MaxInt64)
	for len(out) < limit {
		var level int64
		found, more := false, false
		if err := w.query(stmt, func(r row) error {
			if r.isNull(0) {
				found, level, more = true, r.int64(1), !r.isNull(2)
				return nil
			}
			out = append(out, claimCand{ref: r.int64(0)})
			return nil
		}, cs.args(queue, below, now, limit-len(out))...); err != nil {
			return nil, err
		}
		if !found || !more {
			break
		}
		below = level
	}
	return out, nil
}

// queueCursor walks one queue's claimable runs for a claim, a priority at a
// time, and judges them by the queue's limits.
type queueCursor struct {
	q       storage.Queue
	limited bool
	level   int64 // the priority being read
	has     bool  // level is set: the queue has runs at it
	rank    int64 // a limited queue's pass: 0 recoveries, then 1
	buf     []claimCand
	pos     int
	done    bool // the level (a limited queue's: the pass) is read to its end
	after   claimCand
	// A limited queue's places, counted at its first ready run.
	counted  bool
	running  int            // runs holding a place
	started  int            // starts within the rate period
	parts    map[string]int // runs holding a place, by partition
	fullPart []string       // partitions full
}

// claimer picks the runs one claim leases.
type claimer struct {
	w         *wtx
	cs        *claimStmts
	now       int64
	remaining int
	cursors   []*queueCursor
}

// pick returns the runs to lease, in the claim's order, at most limit.
func (w *wtx) pick(cs *claimStmts, queues []storage.Queue, limit int, now int64) ([]claimCand, error) {
	if len(queues) == 1 && !queues[0].Limited() {
		return w.pickUnlimited(cs, queues[0].Name, limit, now)
	}
	cl := &claimer{w: w, cs: cs, now: now, remaining: limit}
	for _, q := range queues {
		c := &queueCursor{q: q, limited: q.Limited()}
		if err := cl.nextLevel(c, math.MaxInt64); err != nil {
			return nil, err
		}
		cl.cursors = append(cl.cursors, c)
	}
	var out []claimCand
	for cl.remaining > 0 {
		// The highest priority any queue has left.
		var level int64
		any := false
		for _, c := range cl.cursors {
			if c.has && (!any || c.level > level) {
				level, any = c.level, true
			}
		}
		if !any {
			break
		}
		for cl.remaining > 0 {
			var best *queueCursor
			var head claimCand
			for _, c := range cl.cursors {
				if !c.has || c.level != level {
					continue
				}
				h, ok, err := cl.peek(c)
				if err != nil {
					return nil, err
				}
				if ok && (best == nil || h.before(head)) {
					best, head = c, h
				}
			}
			if best == nil {
				break
			}
			out = append(out, best.take(head))
			cl.remaining--
		}
		if cl.remaining == 0 {
			break
		}
		for _, c := range cl.cursors {
			if c.has && c.level == level {
				if err := cl.nextLevel(c, level); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// nextLevel moves c to its queue's highest priority below below.
func (cl *claimer) nextLevel(c *queueCursor, below int64) error {
	p, found, err := cl.cs.topPriority(cl.w.conn, c.q.Name, below)
	if err != nil {
		return err
	}
	c.level, c.has = p, found
	c.rank, c.buf, c.pos, c.done = 0, c.buf[:0], 0, false
	c.after = claimCand{claimAt: math.MinInt64}
	return nil
}

// peek returns c's next admissible run at its level, reading more of the
// index as needed; ok is false when it has none.
func (cl *claimer) peek(c *queueCursor) (claimCand, bool, error) {
	for {
		for ; c.pos < len(c.buf); c.pos++ {
			if h := c.buf[c.pos]; c.admits(h) {
				return h, true, nil
			}
		}
		if c.done {
			if !c.limited || c.rank == 1 {
				return claimCand{}, false, nil
			}
			// The recoveries are done: the ready runs, if the queue has
			// a place for any.
			c.rank, c.buf, c.pos, c.done = 1, c.buf[:0], 0, false
			c.after = claimCand{claimAt: math.MinInt64}
			if err := cl.count(c); err != nil {
				return claimCand{}, false, err
			}
			if c.full() {
				c.done = true
				return claimCand{}, false, nil
			}
		}
		if err := cl.read(c); err != nil {
			return claimCand{}, false, err
		}
	}
}

// read reads c's next runs into its buffer.
func (cl *claimer) read(c *queueCursor) error {
	c.buf, c.pos = c.buf[:0], 0
	each := func(r row) error {
		c.buf = append(c.buf, scanCand(r))
		return nil
	}
	if !c.limited {
		// Every run is admissible: the claim needs no more than this.
		c.done = true
		return cl.w.query(cl.cs.of(c.q.Name).all, each, cl.cs.args(c.q.Name, c.level, cl.now, cl.remaining)...)
	}
	n := max(cl.remaining, 64)
	rateFull := c.rank == 1 && c.q.Rate > 0 && c.started >= c.q.Rate
	full := "[]"
	if c.rank == 1 && len(c.fullPart) > 0 {
		b, _ := json.Marshal(c.fullPart) // strings only: cannot fail
		full = string(b)
	}
	a := c.after
	if err := cl.w.query(cl.cs.of(c.q.Name).page, each, cl.cs.args(c.q.Name, c.level, cl.now, n, c.rank,
		a.claimAt, a.workflow, a.ref, rateFull, full, a.version)...); err != nil {
		return err
	}
	if len(c.buf) < n {
		c.done = true
	}
	if len(c.buf) > 0 {
		c.after = c.buf[len(c.buf)-1]
	}
	return nil
}

// count reads a limited queue's places once, at its first ready run.
func (cl *claimer) count(c *queueCursor) error {
	if c.counted {
		return nil
	}
	c.counted = true
	q := c.q
	if q.Concurrency > 0 || q.PartitionConcurrency > 0 {
		if err := cl.countRunning(c); err != nil {
			return err
		}
	}
	if q.Rate > 0 {
		// The starts that left the window go; those left are counted.
		if _, err := cl.w.exec(`DELETE FROM queue_starts WHERE queue = ?1 AND at <= ?2`, q.Name, cl.now-q.RatePeriod.Nanoseconds()); err != nil {
			return err
		}
		marked := false
		if _, err := cl.w.queryRow(countStartsQuery, func(r row) {
			marked = !r.isNull(1) && r.int64(1) == rateMark
			c.started = int(r.int64(0))
			if marked {
				c.started--
			}
		}, q.Name); err != nil {
			return err
		}
		if !marked {
			// Once per queue: from now on its eager starts are logged.
			if _, err := cl.w.exec(`INSERT INTO queue_starts (queue, at) VALUES (?1, ?2)`, q.Name, rateMark); err != nil {
				return err
			}
		}
	}
	return nil
}

// rateMark is the time of the row of queue_starts that marks a queue as
// rate-limited: a claim that counts the queue's starts for a rate leaves
// it once, and a run created leased on the queue (NewRun.Lease) logs its
// start only when it is there (logEagerStart). A claim hands the store its
// queues' limits, which a create does not know, and logging the eager
// starts of every queue would fill queue_starts with the starts of queues
// no claim ever prunes. No start is at rateMark, and no pruning reaches
// it; a queue never claimed with a rate has no mark, so its eager starts
// go unlogged, as a claim without a rate logs none.
const rateMark = math.MaxInt64

// countStartsQuery counts a rate-limited queue's starts (?1), its mark
// among them (the greatest time, rateMark when marked).
const countStartsQuery = `SELECT count(*), max(at) FROM queue_starts WHERE queue = ?1`

// logEagerStartQuery logs a start of queue ?1 at ?2 when the queue is
// marked rate-limited (rateMark, ?3).
const logEagerStartQuery = `INSERT INTO queue_starts (queue, at) SELECT ?1, ?2
	WHERE EXISTS (SELECT 1 FROM queue_starts WHERE queue = ?1 AND at = ?3)`

// logEagerStart logs the start of a run created leased on queue at now,
// as a claim logs the runs it starts on a rate-limited queue, when a claim
// has marked the queue rate-limited (see rateMark).
func (w *wtx) logEagerStart(queue string, now int64) error {
	_, err := w.exec(logEagerStartQuery, queue, now, int64(rateMark))
	return err
}

// countRunning counts the places a limited queue's runs hold: its running
// runs, and with a partition limit those of each partition. They are the
// recoveries' ranges of the claim index (a running run's claim_at is its
// lease's expiry, never NULL), one per priority the queue has, so the
// count reads the running runs and a seek per priority, however many runs
// wait; no index of running runs of its own is kept, which every claim
// and every end would pay for.
func (cl *claimer) countRunning(c *queueCursor) error {
	q := c.q
	stmts := cl.cs.of(q.Name)
	if q.PartitionConcurrency > 0 {
		c.parts = make(map[string]int)
	}
	for below := int64(math.MaxInt64); ; {
		p, found, err := cl.cs.topPriority(cl.w.conn, q.Name, below)
		if err != nil || !found {
			if err != nil {
				return err
			}
			break
		}
		below = p
		if q.PartitionConcurrency == 0 {
			if _, err := cl.w.queryRow(stmts.running, func(r row) { c.running += int(r.int64(0)) }, cl.cs.args(q.Name, p)...); err != nil {
				return err
			}
			continue
		}
		if err := cl.w.query(stmts.partitions, func(r row) error {
			c.running++
			c.parts[r.str(0)]++
			return nil
		}, cl.cs.args(q.Name, p)...); err != nil {
			return err
		}
	}
	for part, n := range c.parts {
		if n >= q.PartitionConcurrency && part != "" {
			c.fullPart = append(c.fullPart, part)
		}
	}
	return nil
}

// full reports whether a limited queue has no place left.
func (c *queueCursor) full() bool {
	return c.q.Concurrency > 0 && c.running >= c.q.Concurrency
}

// admits reports whether the queue's limits let the claim take h.
func (c *queueCursor) admits(h claimCand) bool {
	if !c.limited || h.rank == 0 {
		return true // a recovery holds its place already
	}
	if c.full() || c.q.Rate > 0 && h.fresh && c.started >= c.q.Rate {
		return false
	}
	// A run without a partition key is bound by no partition's limit.
	return c.q.PartitionConcurrency == 0 || h.partition == "" || c.parts[h.partition] < c.q.PartitionConcurrency
}

// take counts the places h takes, and returns it marked for the rate
// log if it is a start on a rate-limited queue.
func (c *queueCursor) take(h claimCand) claimCand {
	c.pos++
	if !c.limited || h.rank == 0 {
		return h
	}
	c.running++
	if h.fresh && c.q.Rate > 0 {
		c.started++
		h.logStart = c.q.Name
	}
	if c.q.PartitionConcurrency > 0 && h.partition != "" {
		c.parts[h.partition]++
		if c.parts[h.partition] == c.q.PartitionConcurrency {
			c.fullPart = append(c.fullPart, h.partition)
		}
	}
	return h
}

// NextWake reads the earliest claim_at of the named workflows and queues:
// the first entry of each (queue, priority, rank) range of runs_claim, a
// few seeks per priority.
func (s *Store) NextWake(ctx context.Context, req storage.NextWakeRequest) (storage.NextWake, error) {
	if err := req.Validate(); err != nil {
		return storage.NextWake{}, fmt.Errorf("sqlitestore: %w", err)
	}
	var w storage.NextWake
	cs := s.claims.get(req.Workflows, req.Versions)
	if cs == nil {
		return w, nil
	}
	err := s.read(ctx, "next wake", true, func(c *conn) error {
		w = storage.NextWake{}
		var earliest int64 = math.MaxInt64
		now := s.now().UnixNano()
		for _, q := range req.QueueNames() {
			below := int64(math.MaxInt64)
			for earliest > now {
				p, found, err := cs.topPriority(c, q, below)
				if err != nil || !found {
					if err != nil {
						return err
					}
					break
				}
				for rank := range int64(2) {
					if _, err := c.queryRow(cs.of(q).first, func(r row) { earliest = min(earliest, r.int64(0)) },
						cs.args(q, p, nil, nil, rank)...); err != nil {
						return err
					}
				}
				below = p
			}
		}
		if earliest != math.MaxInt64 {
			w = storage.NextWake{Found: true, After: max(0, time.Duration(earliest-now))}
		}
		return nil
	})
	return w, err
}

// queueStatsQuery counts the unfinished runs of the queues ?1 (a JSON
// list) by status, and the queued by whether they are due at ?2, with the
// earliest ready_at of each group (that of the due queued runs is the
// oldest ready run's). It reads the unfinished runs through runs_status,
// never a finished one; no index of its own keeps the runs' queues by
// status, because every run's creation, claim and end would pay to keep
// it for a read that counts. The earliest ready_at comes from the rows
// the count reads already: the claim indexes hold it too, but would find
// it by statements of their own, a seek per priority, each passing over
// the waiting runs due at their deadline, which share the queued runs'
// ranges.
const queueStatsQuery = `SELECT queue, status, coalesce(ready_at <= ?2, 0), count(*), min(ready_at) FROM runs INDEXED BY runs_status
	WHERE status IN ('queued', 'running', 'waiting', 'paused') AND queue IN (SELECT value FROM json_each(?1))
	GROUP BY 1, 2, 3`

// QueueStats counts the unfinished runs of each named queue by status,
// and finds how long the oldest ready one has waited, in one read of
// runs_status.
func (s *Store) QueueStats(ctx context.Context, queues []string) ([]storage.QueueStats, error) {
	for _, q := range queues {
		if err := storage.CheckQueueName(q); err != nil {
			return nil, fmt.Errorf("sqlitestore: queue stats: %w", err)
		}
	}
	out := make([]storage.QueueStats, len(queues))
	at := make(map[string][]int, len(queues))
	for i, q := range queues {
		out[i].Queue = q
		at[q] = append(at[q], i)
	}
	if len(queues) == 0 {
		return out, nil
	}
	b, _ := json.Marshal(queues) // strings only: cannot fail
	err := s.read(ctx, "queue stats", false, func(c *conn) error {
		now := s.now().UnixNano()
		for i := range out {
			out[i] = storage.QueueStats{Queue: out[i].Queue}
		}
		return c.query(queueStatsQuery, func(r row) error {
			n := int(r.int64(3))
			for _, i := range at[r.str(0)] {
				st := &out[i]
				switch storage.RunStatus(r.str(1)) {
				case storage.StatusQueued:
					if r.int64(2) != 0 {
						st.Ready += n
						if !r.isNull(4) {
							st.OldestReady = max(0, time.Duration(now-r.int64(4)))
						}
					} else {
						st.Scheduled += n
					}
				case storage.StatusRunning:
					st.Running += n
				case storage.StatusWaiting:
					st.Waiting += n
				case storage.StatusPaused:
					st.Paused += n
				}
			}
			return nil
		}, string(b), now)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
