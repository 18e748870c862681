package pgstore

import (
	"strconv"
	"strings"
)

// queries holds every statement with the schema filled in, built once per
// store so that pgx's statement cache sees the same text on every call.
//
// In every statement that needs the time, $1 is the clock: NULL for the
// database's now(), or the Options.Clock value. Every other value is a bound
// parameter too.
type queries struct {
	createRuns     string
	createLeased   string
	createAttrs    string
	createBoth     string
	selectRuns     string
	getRun         string
	countRuns      string
	countRunsOf    string
	claim          string
	claimOne       string
	nextWake       string
	nextWakeOne    string
	loadReplay     string
	getCheckpoint  string
	checkpoint     string
	checkpointOne  string
	recordAttempts string
	heartbeat      string
	lockRun        string
	insertCkpt     string
	refuseCkpt     string
	insertAttempt  string
	takeEvent      string
	extendLease    string
	park           string
	complete       string
	completeMany   string
	completeRides  string
	loadClaimed    string
	parkMany       string
	emit           string
	bufferEvent    string
	deliver        string
	notify         string
	notifyFinished string
	history        string
	terminate      string
	cascade        string
	cascadeMany    string
	cancel         string
	forkSeq        string
	restart        string
	executions     string
	continueAsNew  string
	caseCkpt       string
	putWorkflows   string
	putEvents      string
	getWorkflows   string
	getEvents      string

	claimCandidates string
	claimPicked     string
	lockQueues      string
	queuePlaces     string
	queueStarts     string
	recordStarts    string
	queueStats      string
	putQueues       string
	getQueues       string
	insertSchedule  string
	updateSchedule  string
	getSchedule     string
	listSchedules   string
	dueSchedules    string
	deleteSchedule  string
	purge           string
	purgeDry        string
	putWorker       string
	expireWorkers   string
	listWorkers     string
	removeWorker    string

	readRun    string
	txNow      string
	lockKey    string
	getKey     string
	putKey     string
	joinInput  string
	family     string
	dropFamily string
	resetRun   string

	sendUpdate  string
	getUpdate   string
	listUpdates string
	replyCheck  string
	interact    string
	readStream  string
	listStreams string

	setAttrs    string
	insertAttrs string
	deleteAttrs string
}

// runColumns are the columns scanRun reads, in its order.
var runColumns = []string{
	"id", "workflow", "parent_id", "status", "input", "output", "error",
	"pause_requested", "ready_at", "wait_key", "wait_topic", "wait_kind", "wait_deadline",
	"owner", "lease_until", "token", "recoveries", "parent_policy", "execution", "started_at", "ended_at",
	"active_key", "active_attempt", "active_started", "created_at", "updated_at",
	"wait_also_keys", "wait_also_topics", "wait_also_kinds", "deadline", "progress",
	"queue", "partition", "priority", "version", "headers", "hold", "cancel_reason", "attrs",
}

// cols lists runColumns, each prefixed by alias and a dot when alias is set.
func cols(alias string) string {
	if alias == "" {
		return strings.Join(runColumns, ", ")
	}
	return alias + "." + strings.Join(runColumns, ", "+alias+".")
}

const clockCTE = `clock AS (SELECT coalesce($1::timestamptz, now()) AS now)`

// attemptsFrom is the row source of attempts passed as parallel arrays
// $N..$N+5 (key, number, started, ended, error, retry_at).
func attemptsFrom(n int) string {
	p := func(i int) string { return "$" + strconv.Itoa(n+i) }
	return `unnest(` + p(0) + `::text[], ` + p(1) + `::int[], ` + p(2) + `::timestamptz[], ` + p(3) + `::timestamptz[], ` + p(4) +
		`::text[], ` + p(5) + `::timestamptz[]) WITH ORDINALITY AS a(key, number, started, ended, error, retry_at, ord)`
}

// attrsFrom is the row source of search attributes passed as parallel
// arrays $n..$n+5 (see attrArrays): v(run_id, name, str, num, at, flag).
func attrsFrom(n int) string {
	p := func(i int) string { return "$" + strconv.Itoa(n+i) }
	return `unnest(` + p(0) + `::text[], ` + p(1) + `::text[], ` + p(2) + `::text[], ` + p(3) + `::float8[], ` + p(4) +
		`::timestamptz[], ` + p(5) + `::bool[]) AS v(run_id, name, str, num, at, flag)`
}

// finished is the SQL list of the final statuses.
const finished = `('complete', 'errored', 'terminated')`

// checkpointUpdate is the checkpoint statements' update of the runs of a
// CTE named w (id, written, pause, unwait) with the clock: park the run
// paused when a pause takes effect, else extend its lease by lease
// microseconds; forget the recoveries of a written checkpoint, the wait
// its key answered, and the active step; publish progress (NULL: keep
// the run's).
func checkpointUpdate(lease, progress string) string {
	return `UPDATE {s}.runs r SET
	status = CASE WHEN w.pause THEN 'paused' ELSE r.status END,
	pause_requested = CASE WHEN w.pause THEN false ELSE r.pause_requested END,
	ready_at = CASE WHEN w.pause THEN clock.now ELSE r.ready_at END,
	lease_until = CASE WHEN w.pause THEN clock.now ELSE clock.now + ` + lease + ` * interval '1 microsecond' END,
	recoveries = CASE WHEN w.written THEN 0 ELSE r.recoveries END,
	wait_key = CASE WHEN w.unwait THEN NULL ELSE r.wait_key END,
	wait_topic = CASE WHEN w.unwait THEN NULL ELSE r.wait_topic END,
	wait_kind = CASE WHEN w.unwait THEN NULL ELSE r.wait_kind END,
	wait_deadline = CASE WHEN w.unwait THEN NULL ELSE r.wait_deadline END,
	wait_also_keys = CASE WHEN w.unwait THEN NULL ELSE r.wait_also_keys END,
	wait_also_topics = CASE WHEN w.unwait THEN NULL ELSE r.wait_also_topics END,
	wait_also_kinds = CASE WHEN w.unwait THEN NULL ELSE r.wait_also_kinds END,
	progress = coalesce(` + progress + `, r.progress),
	{clearActive},
	updated_at = clock.now
FROM w, clock`
}

// clearActive is the SET list that forgets the run's active step.
const clearActive = `active_key = NULL, active_attempt = NULL, active_started = NULL`

// clearWait is the SET list that removes the run's wait, every case of it.
const clearWait = `wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL,
	wait_also_keys = NULL, wait_also_topics = NULL, wait_also_kinds = NULL`

// ckptColumns are the columns scanCheckpoint reads, in its order.
const ckptColumns = `key, kind, output, error, seq, created_at, execution, forked_from, input`

// schedColumns are the columns scanSchedule reads, in its order.
const schedColumns = `id, workflow, cron, time_zone, input, queue, partition, priority, overlap, catch_up,
	catch_up_window, paused, next_fire_at, check_at, held, last_fire_at, last_run_id, revision, created_at, updated_at`

// pairs names the (workflow, queue) pairs a claim or NextWake walks: a
// FROM item p(workflow, queue, versions), the condition on a run r of
// being on one of the queues, and the versions filter (see allowed).
type pairs struct {
	from, queue string
	// names and versions are the parameters of the versions filter.
	names, versions string
}

// allowed is the versions filter of a claim or NextWake
// (storage.ClaimRequest.Versions) for the workflow named by the SQL
// workflow: the versions its entry allows, or NULL when it has no entry.
// The filter is two parameters (see versionArrays): names, the workflows
// with an entry (text[]), and versions, a two-dimensional int[] whose
// row i lists the versions of the entry of names[i], padded with -1,
// which no run has. A slice of one row and an array_position: no
// sub-select for the planner to plan, nor for the executor to run, per
// pair or per run.
func (p pairs) allowed(workflow string) string {
	i := `array_position(` + p.names + `::text[], ` + workflow + `)`
	return `(` + p.versions + `::int[])[` + i + `:` + i + `]`
}

// versionIn is the condition on a run r of passing the versions filter,
// allowed being the versions its workflow's entry allows (NULL: no
// entry): one comparison per version listed, and none for a workflow
// without an entry, on each run a scan reads. In the scan's WHERE, before
// its LIMIT and FOR UPDATE SKIP LOCKED, a run passed over is neither
// locked nor counted against the limit.
func versionIn(allowed string) string {
	return `
			AND coalesce(r.version = ANY(` + allowed + `), true)`
}

// onePair is the pairs of the workflows $2 on the one queue $6: the claim
// of the default queue, and of any single queue. The workflows are read
// through a sub-select that hides the array from the planner, so that a
// custom plan sees what the cached generic plan sees: the generic plan is
// then the cheaper, and the statement is planned once per connection
// instead of on every call (planning it cost about as much as running
// it). Each pair's versions are read once, not per run.
func onePair(queue, names, versions string) pairs {
	p := pairs{queue: `r.queue = ` + queue + `::text`, names: names, versions: versions}
	p.from = `(SELECT w AS workflow, ` + queue + `::text AS queue, ` + p.allowed("w") + ` AS versions
	FROM unnest((SELECT $2::text[])) w) p`
	return p
}

// everyPair is the pairs of the workflows $2 and each queue in the array
// parameter queues.
func everyPair(queues, names, versions string) pairs {
	p := pairs{queue: `r.queue = ANY(` + queues + `::text[])`, names: names, versions: versions}
	p.from = `(SELECT w AS workflow, q AS queue, ` + p.allowed("w") + ` AS versions
	FROM unnest($2::text[]) w, unnest(` + queues + `::text[]) q) p`
	return p
}

// readyRuns is the condition on a run r of being queued or waiting with a
// ready time, in one of the ready indexes (see migration 005):
// runs_queue_ready_idx at priority 0, runs_queue_priority_idx otherwise.
// Each scan states its index's predicate in these words, so that the
// planner can use the index.
const (
	readyZero = `r.status IN ('queued', 'waiting') AND r.ready_at IS NOT NULL AND r.priority = 0`
	readyPrio = `r.status IN ('queued', 'waiting') AND r.ready_at IS NOT NULL AND r.priority <> 0`
)

// levelsCTE is a CTE named levels: for each of the pairs, each priority
// level other than 0 its ready runs use. It is a loose index scan of
// runs_queue_priority_idx, backwards: one probe per level, lowest first,
// and one more that finds no higher level, so a pair without such runs,
// nearly every pair, costs one probe of an index that is usually empty.
// Each probe lands on the tail of a level (its latest ready time), never
// on its head, where the entries of the runs claimed since the last
// vacuum pile up: the claim walks those once, in its scan of the level.
func levelsCTE(p pairs) string {
	return `levels AS (
	SELECT p.workflow, p.queue, p.versions, f.priority FROM ` + p.from + `, LATERAL (
		SELECT r.priority FROM {s}.runs r
		WHERE r.workflow = p.workflow AND r.queue = p.queue AND ` + readyPrio + `
		ORDER BY r.priority, r.ready_at DESC LIMIT 1
	) f
	UNION ALL
	SELECT l.workflow, l.queue, l.versions, f.priority FROM levels l, LATERAL (
		SELECT r.priority FROM {s}.runs r
		WHERE r.workflow = l.workflow AND r.queue = l.queue AND ` + readyPrio + ` AND r.priority > l.priority
		ORDER BY r.priority, r.ready_at DESC LIMIT 1
	) f
)`
}

// readyCTE is a claim's CTE named ready: up to $3 runs of each pair at
// priority 0 ready by now, oldest first, locked, as the claim read them
// before queues; and of the other levels (levelsCTE), up to $3 of each
// level likewise, of which the $3 first by priority, highest first, then
// ready time. Each scan passes filter (SQL on r, "" for none). The clock
// bounds every scan in its index condition, so runs sleeping into the
// future cost one probe. The second part's own limit keeps the planner's
// estimate of the runs picked small whatever it guesses of the levels.
func readyCTE(p pairs, filter string) string {
	return `ready AS (
	SELECT c.id, 0 AS priority, false AS recovery, c.since FROM ` + p.from + `, LATERAL (
		SELECT r.id, r.ready_at AS since FROM {s}.runs r
		WHERE r.workflow = p.workflow AND r.queue = p.queue AND ` + readyZero + `
			AND r.ready_at <= coalesce($1::timestamptz, now())` + versionIn("p.versions") + filter + `
		ORDER BY r.ready_at
		LIMIT $3
		FOR UPDATE OF r SKIP LOCKED
	) c
	UNION ALL
	(SELECT c.id, c.priority, false, c.since FROM levels l, LATERAL (
		SELECT r.id, r.priority, r.ready_at AS since FROM {s}.runs r
		WHERE r.workflow = l.workflow AND r.queue = l.queue AND ` + readyPrio + ` AND r.priority = l.priority
			AND r.ready_at <= coalesce($1::timestamptz, now())` + versionIn("l.versions") + filter + `
		ORDER BY r.ready_at
		LIMIT $3
		FOR UPDATE OF r SKIP LOCKED
	) c
	ORDER BY c.priority DESC, c.since, c.id
	LIMIT $3)
)`
}

// expiredCTE is a claim's CTE named expired: up to $3 running runs of the
// workflows $2 on the queues of p whose lease expired, by priority then
// expiry, locked, passing filter, through runs_queue_running_idx.
func expiredCTE(p pairs, filter string) string {
	return `expired AS (
	SELECT r.id, r.priority, true AS recovery, r.lease_until AS since FROM {s}.runs r, clock
	WHERE r.status = 'running' AND ` + p.queue + ` AND r.lease_until <= clock.now
		AND r.workflow = ANY($2::text[])` + versionIn(p.allowed("r.workflow")) + filter + `
	ORDER BY r.priority DESC, r.lease_until
	LIMIT $3
	FOR UPDATE OF r SKIP LOCKED
)`
}

// nextWakeSQL is NextWake's statement for the pairs p of the workflows
// $2: microseconds from the clock to the earliest ReadyAt of a ready run
// or lease expiry of a running one (NULL: none), through the claim's
// indexes: the first entry of each pair in runs_queue_ready_idx, and of
// each priority level of each pair in runs_queue_priority_idx, is its
// earliest.
func nextWakeSQL(p pairs) string {
	return `WITH RECURSIVE ` + clockCTE + `,
` + levelsCTE(p) + `
SELECT (extract(epoch FROM least(
	(SELECT min(first.ready_at) FROM ` + p.from + `, LATERAL (
		SELECT r.ready_at FROM {s}.runs r
		WHERE r.workflow = p.workflow AND r.queue = p.queue AND ` + readyZero + versionIn("p.versions") + `
		ORDER BY r.ready_at LIMIT 1
	) first),
	(SELECT min(first.ready_at) FROM levels l, LATERAL (
		SELECT r.ready_at FROM {s}.runs r
		WHERE r.workflow = l.workflow AND r.queue = l.queue AND ` + readyPrio + ` AND r.priority = l.priority` + versionIn("l.versions") + `
		ORDER BY r.ready_at LIMIT 1
	) first),
	(SELECT min(r.lease_until) FROM {s}.runs r
		WHERE r.status = 'running' AND ` + p.queue + ` AND r.workflow = ANY($2::text[])` + versionIn(p.allowed("r.workflow")) + `)
) - clock.now) * 1000000)::bigint FROM clock`
}

// claimSQL is the claim of queues without limits, for the pairs p of the
// workflows $2: $3 limit, $4 owner, $5 lease micros, p's queues and p's
// versions filter.
//
// Bounded, locked scans feed one update: ready runs of each (workflow,
// queue) pair (readyCTE: at priority 0 in runs_queue_ready_idx order, at
// other levels in runs_queue_priority_idx order), and expired leases
// through runs_queue_running_idx. The ready scans bound ready_at by the
// clock in their index condition, so runs sleeping into the future cost
// nothing, and each stops at the limit, so the backlog behind costs
// nothing either. SKIP LOCKED makes concurrent claimers take disjoint batches
// without waiting; a row updated since the snapshot is rechecked against
// the conditions when it is locked. The picked runs are the first by
// priority (highest first), recoveries before ready runs, then oldest
// ReadyAt or lease expiry. The claim forgets the active step the last
// holder reported and the run's hold, and stamps a run's first claim since
// its creation or Restart. Every scan tests the versions filter (versionIn) on the runs it
// reads, before its limit: a run of a version the claim does not allow is
// neither locked nor taken, and does not count against the limit, though
// the scan still reads it on its way to the runs behind.
//
// claimCandidates and claimPicked are a limited claim's (see
// claimLimited).
func claimSQL(p pairs) string {
	return `WITH RECURSIVE ` + clockCTE + `,
` + levelsCTE(p) + `,
` + readyCTE(p, "") + `,
` + expiredCTE(p, "") + `,
picked AS (
	SELECT id, priority, recovery, since FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired) u
	ORDER BY priority DESC, recovery DESC, since, id
	LIMIT $3
)
` + claimUpdate
}

// limitedFilter is what a limited claim's ready scans pass over (see
// claimCandidates).
const limitedFilter = `
			AND r.id <> ALL($9::text[])
			AND NOT (r.first_claimed_at IS NULL AND r.queue = ANY($8::text[]))
			AND NOT EXISTS (SELECT 1 FROM unnest($6::text[], $7::text[]) x(queue, part)
				WHERE x.queue = r.queue AND x.part = r.partition)`

// claimUpdate leases the runs of a CTE named picked (id, priority,
// recovery, since) to owner $4 for $5 microseconds and returns what a
// ClaimedRun needs (its requested cancellation too), with the picked
// row's priority, recovery and since.
const claimUpdate = `UPDATE {s}.runs r SET
	status = 'running',
	ready_at = NULL,
	owner = $4,
	lease_until = clock.now + $5::bigint * interval '1 microsecond',
	token = r.token + 1,
	recoveries = CASE WHEN r.status = 'running' THEN r.recoveries + 1 ELSE r.recoveries END,
	first_claimed_at = coalesce(r.first_claimed_at, clock.now),
	hold = NULL,
	{clearActive},
	updated_at = clock.now
FROM picked, clock
WHERE r.id = picked.id
RETURNING r.id, r.token, r.workflow, r.parent_id, r.input, r.recoveries, r.suspend_state,
	r.wait_key, r.wait_topic, r.wait_kind, r.wait_deadline, r.wait_also_keys, r.wait_also_topics, r.wait_also_kinds,
	r.deadline, r.lease_until, r.version, r.headers, r.cancel_reason, picked.since, picked.priority, picked.recovery`

// purgeVictims selects the runs a purge deletes: $1 statuses (finished
// ones), finished before $2, of the workflows $3 (empty: any) but not
// $4, oldest end first, at most $5, through runs_ended_idx.
const purgeVictims = `SELECT id FROM {s}.runs
	WHERE status IN {finished} AND status = ANY($1::text[]) AND ended_at < $2
		AND (cardinality($3::text[]) = 0 OR workflow = ANY($3::text[])) AND NOT workflow = ANY($4::text[])
	ORDER BY ended_at
	LIMIT $5`

// createSQL is the creation statement: $2 ids, $3 workflows, $4 parent
// ids, $5 inputs, $6 parent policies, $7 start times (NULL: now), $8
// deadlines, $9 queues, $10 partitions, $11 priorities, $12 workflow
// versions, $13 headers (JSON text, NULL: none), then the channel. Rows go
// in in ID order, so that concurrent creates of overlapping IDs wait for
// each other instead of deadlocking. Each new run's first execution is
// recorded by the same statement. Of an ID given twice (two calls in one
// batch), the first request's row goes in. A start time ahead of the
// clock delays the run; the notification goes out for it too, so that
// engines elsewhere learn of the new wake time.
//
// A new run's token starts at 0, or where a run of its ID that a
// replacement deleted left it (run_tokens, see dropFamily), whose entry
// the statement then deletes. run_tokens is empty but for the IDs of
// deleted runs not yet taken again: the statement reads the entries of
// its IDs once, by the primary key (kept), and deletes those of the runs
// it created with a token (taken), so a plain creation costs an index
// lookup that finds nothing and a deletion of no IDs. Reading the
// entries as one set, rather than probing per run, keeps the plan's
// estimate from growing with the runs it creates, so that a creation of
// one run keeps a generic plan instead of being planned on every call
// (TestCreatePlannedOnce). The entries are read without a lock and
// deleted after the runs' rows went in: the statement takes its locks in
// the order a replacement takes them, runs then run_tokens. They are read
// in the statement's snapshot: a creation that waits for an uncommitted
// replacement deleting a run of its ID (ON CONFLICT waits for the
// deleting transaction, then inserts) does not see the entry that
// replacement writes, and starts at 0, the entry staying for a later run
// of the ID. Only a create of a descendant's ID racing the replacement of
// its ancestor is so exposed; a child the new run creates after the
// commit finds the entry.
//
// With leased (createLeased), $14 is each run's lease owner (NULL: not
// leased), $15 its lease in microseconds, $16 the queues whose starts are
// recorded (see Store.rated), and $17 the channel. A leased run goes in
// as a claim would leave it (see claimUpdate): running, not ready, held
// by its owner until the clock plus its lease, its token taken once (1
// for an ID without an entry in run_tokens), started (its first claim is
// now), and its start recorded in queue_starts when its queue is one of
// $16. Only runs created ready send the notification: a leased run is its
// owner's to execute.
//
// With attrs (createAttrs, createBoth), the search attributes of the runs
// follow, before the channel: each run's runs.attrs (JSON text, NULL:
// none; see encodeAttrs), then their rows as the parallel arrays of
// attrsFrom (run ID, name, string, number, time, bool). Each run the
// statement created gets its own rows, with its creation time; a run not
// created gets none (the caller sends the rows of an ID's first request
// only, the one the statement creates).
func createSQL(notify, leased, attrs bool) string {
	status, ready := `'queued'`, `greatest(clock.now, coalesce(t.start_at, clock.now))`
	token := `coalesce(k.token, 0)`
	cols, vals, from, names := "", "", "", ""
	channel, cond, starts, returning := 14, "true", "", ""
	if leased {
		status = `CASE WHEN t.owner IS NULL THEN 'queued' ELSE 'running' END`
		ready = `CASE WHEN t.owner IS NULL THEN ` + ready + ` END`
		token += ` + CASE WHEN t.owner IS NULL THEN 0 ELSE 1 END`
		cols = `, owner, lease_until, first_claimed_at`
		vals = `, coalesce(t.owner, ''), clock.now + t.lease * interval '1 microsecond',
		CASE WHEN t.owner IS NOT NULL THEN clock.now END`
		from, names = `, $14::text[], $15::bigint[]`, `, owner, lease`
		channel, cond, returning = 17, "status = 'queued'", ", queue, status"
		starts = `,
st AS (
	INSERT INTO {s}.queue_starts (queue, at)
	SELECT ins.queue, clock.now FROM ins, clock WHERE ins.status = 'running' AND ins.queue = ANY($16::text[])
)`
	}
	if attrs {
		p := "$" + strconv.Itoa(channel)
		cols, vals = cols+`, attrs`, vals+`, t.attrs::jsonb`
		from, names = from+`, `+p+`::text[]`, names+`, attrs`
		starts += `,
att AS (
	INSERT INTO {s}.run_attrs (run_id, name, str, num, at, flag, created_at)
	SELECT v.run_id, v.name, v.str, v.num, v.at, v.flag, ins.started_at
	FROM ` + attrsFrom(channel+1) + ` JOIN ins ON ins.id = v.run_id
	ORDER BY v.run_id, v.name
)`
		channel += 7
	}
	return `WITH ` + clockCTE + `,
kept AS MATERIALIZED (
	SELECT id, token FROM {s}.run_tokens WHERE id = ANY($2::text[])
),
ins AS (
	INSERT INTO {s}.runs (id, workflow, parent_id, parent_policy, status, input, ready_at, deadline, execution, started_at, created_at, updated_at,
		queue, partition, priority, version, headers, token` + cols + `)
	SELECT t.id, t.workflow, t.parent_id, t.policy, ` + status + `, t.input, ` + ready + `,
		t.deadline, 1, clock.now, clock.now, clock.now, t.queue, t.partition, t.priority, t.version, t.headers, ` + token + vals + `
	FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[], $7::timestamptz[], $8::timestamptz[],
			$9::text[], $10::text[], $11::int[], $12::int[], $13::text[]` + from + `)
		WITH ORDINALITY AS t(id, workflow, parent_id, input, policy, start_at, deadline, queue, partition, priority, version, headers` + names + `, ord)
		LEFT JOIN kept k ON k.id = t.id, clock
	ORDER BY t.id, t.ord
	ON CONFLICT (id) DO NOTHING
	RETURNING id, started_at, ready_at, token` + returning + `
),
ex AS (
	INSERT INTO {s}.executions (run_id, number, started_at)
	SELECT id, 1, started_at FROM ins
),
taken AS (
	DELETE FROM {s}.run_tokens WHERE id = ANY(ARRAY(SELECT id FROM ins WHERE token > 0))
)` + starts + notifyCTE(notify, "ins", cond, channel) + `
SELECT ins.id FROM ins` + notifyJoin(notify)
}

// completeManySQL is the statement of completions of several runs at
// once (each run at most once), as parallel arrays: $2 run, $3 token, $4
// status, $5 output, $6 error (JSON text), $7 progress (NULL: keep the
// run's); then the ended channel. Like complete, for the runs whose lease
// holds, locked in ID order; one row, the request's ordinal, per run
// ended.
//
// With rides (completeRides), $8 is the key of the checkpoint each
// completion rides with, and $9 the ended channel: the statement runs
// after the checkpoint statement in its transaction, and completes a run
// only if that checkpoint was written by this transaction (the row's
// xmin, compared modulo 2^32 with the 64-bit transaction ID, as
// loadClaimed does) and the run is still running: a checkpoint that
// existed, or one that parked the run paused, leaves the run as it is.
func completeManySQL(notify, rides bool) string {
	keys, names, written, channel := "", "", "", 8
	if rides {
		keys, names, channel = ", $8::text[]", ", key", 9
		written = `
		AND EXISTS (SELECT 1 FROM {s}.checkpoints c
			WHERE c.run_id = r.id AND c.execution = r.execution AND c.key = req.key
				AND c.xmin::text::bigint = pg_current_xact_id()::text::bigint % 4294967296)`
	}
	return `WITH ` + clockCTE + `,
req AS (
	SELECT * FROM unnest($2::text[], $3::bigint[], $4::text[], $5::bytea[], $6::text[], $7::bytea[]` + keys + `)
		WITH ORDINALITY AS q(run_id, token, status, output, error, progress` + names + `, ord)
),
f AS (
	SELECT r.id, req.ord FROM {s}.runs r JOIN req ON req.run_id = r.id AND req.token = r.token
	WHERE r.id = ANY($2::text[]) AND r.status = 'running'` + written + `
	ORDER BY r.id
	FOR UPDATE OF r
),
upd AS (
	UPDATE {s}.runs r SET status = req.status, output = req.output, error = req.error::jsonb,
		progress = coalesce(req.progress, r.progress), ready_at = NULL, {clearWait},
		suspend_state = NULL, pause_requested = false, lease_until = least(r.lease_until, clock.now),
		ended_at = clock.now, {clearActive}, updated_at = clock.now
	FROM f JOIN req ON req.ord = f.ord, clock
	WHERE r.id = f.id
	RETURNING f.ord, r.id, r.execution, r.status, r.error, r.ended_at
),
ex AS (
	UPDATE {s}.executions e SET ended_at = upd.ended_at, status = upd.status, error = upd.error
	FROM upd WHERE e.run_id = upd.id AND e.number = upd.execution
)` + finishedCTE(notify, "upd", channel) + `
SELECT upd.ord FROM upd` + finishedWhere(notify)
}

func buildQueries(schema string, notify bool) queries {
	r := strings.NewReplacer("{s}", schema, "{sched}", schedColumns, "{runs}", cols(""), "{r.runs}", cols("r"),
		"{finished}", finished, "{clearActive}", clearActive, "{clearWait}", clearWait, "{ckpt}", ckptColumns,
		"{upd}", updateColumns)
	var q queries

	// See createSQL.
	q.createRuns = createSQL(notify, false, false)
	q.createLeased = createSQL(notify, true, false)
	q.createAttrs = createSQL(notify, false, true)
	q.createBoth = createSQL(notify, true, true)

	// $2 workflows, $3 queues (nextWakeOne: $3 one queue), $4 and $5 the
	// versions filter (see pairs.allowed).
	q.nextWake = nextWakeSQL(everyPair("$3", "$4", "$5"))
	q.nextWakeOne = nextWakeSQL(onePair("$3", "$4", "$5"))

	q.selectRuns = `SELECT {runs} FROM {s}.runs WHERE id = ANY($1::text[])`
	q.getRun = `SELECT {runs} FROM {s}.runs WHERE id = $1`

	// The runs per status, of every workflow (runs_status_id_idx or the
	// table); countRunsOf: of the workflow $1, through
	// runs_workflow_id_idx, which includes the status. Both can be
	// index-only scans.
	q.countRuns = `SELECT status, count(*) FROM {s}.runs GROUP BY status`
	q.countRunsOf = `SELECT status, count(*) FROM {s}.runs WHERE workflow = $1 GROUP BY status`

	// $2 workflows, $3 limit, $4 owner, $5 lease micros, $6 queues
	// (claimOne: $6 one queue, the claim of the default queue), $7 and $8
	// the versions filter (see pairs.allowed). See claimSQL.
	q.claim = claimSQL(everyPair("$6", "$7", "$8"))
	q.claimOne = claimSQL(onePair("$6", "$7", "$8"))

	// A limited claim's candidates, locked, in claim order: the claim's
	// scans with the exclusions of the places already taken. $2 workflows,
	// $3 how many, $4 the queues that may start ready runs, $5 every queue
	// named (recoveries are never held back), $6 and $7 the (queue,
	// partition) pairs without a free place, $8 the queues whose rate
	// window is full (their runs not yet started are passed over), $9 the
	// runs already considered, $10 and $11 the versions filter (see
	// pairs.allowed). Each row: ID, queue, partition, priority,
	// recovery, since, and whether its claim would be a start.
	q.claimCandidates = `WITH RECURSIVE ` + clockCTE + `,
` + levelsCTE(everyPair("$4", "$10", "$11")) + `,
` + readyCTE(everyPair("$4", "$10", "$11"), limitedFilter) + `,
` + expiredCTE(everyPair("$5", "$10", "$11"), ` AND r.id <> ALL($9::text[])`) + `,
picked AS (
	SELECT id, priority, recovery, since FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired) u
	ORDER BY priority DESC, recovery DESC, since, id
	LIMIT $3
)
SELECT r.id, r.queue, r.partition, picked.priority, picked.recovery, picked.since, r.first_claimed_at IS NULL
FROM picked JOIN {s}.runs r ON r.id = picked.id
ORDER BY picked.priority DESC, picked.recovery DESC, picked.since, r.id`

	// A limited claim's update of the runs it admitted, locked already by
	// claimCandidates: $2 IDs, $3 priorities, $4 owner, $5 lease micros, $6
	// whether each is a recovery, $7 since.
	q.claimPicked = `WITH ` + clockCTE + `,
picked AS (
	SELECT * FROM unnest($2::text[], $3::int[], $6::bool[], $7::timestamptz[]) p(id, priority, recovery, since)
)
` + claimUpdate

	// $1 limited queues, in name order: the claim's locks, one
	// transaction-level advisory lock per queue, which serialize the
	// limited claims of a queue across every process.
	q.lockQueues = `SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) FROM unnest($1::text[]) k`

	// $1 queues: the places held, per queue and partition
	// (runs_queue_running_idx).
	q.queuePlaces = `SELECT queue, partition, count(*) FROM {s}.runs
WHERE status = 'running' AND queue = ANY($1::text[]) GROUP BY queue, partition`

	// $2 rate-limited queues, $3 their periods in microseconds: the starts
	// within each queue's window, after pruning those older.
	q.queueStarts = `WITH ` + clockCTE + `,
q AS (SELECT * FROM unnest($2::text[], $3::bigint[]) q(name, period)),
pruned AS (
	DELETE FROM {s}.queue_starts s USING q, clock
	WHERE s.queue = q.name AND s.at <= clock.now - q.period * interval '1 microsecond'
)
SELECT q.name, (SELECT count(*) FROM {s}.queue_starts s
	WHERE s.queue = q.name AND s.at > clock.now - q.period * interval '1 microsecond')
FROM q, clock`

	// $2 queues: one start each, now.
	q.recordStarts = `INSERT INTO {s}.queue_starts (queue, at) SELECT k, coalesce($1::timestamptz, now()) FROM unnest($2::text[]) k`

	// $1 run. The current execution's checkpoints and the attempts of its
	// keys without one, merged in sequence order, in one statement (one
	// snapshot). Each row: execution, whether it is an attempt, then the
	// checkpoint's columns (NULL for an attempt, and for the one row of a
	// run without checkpoints) and the attempt's. No rows: no such run.
	q.loadReplay = `WITH r AS (SELECT id, execution FROM {s}.runs WHERE id = $1)
SELECT r.execution, false, c.key, c.kind, c.output, c.error, c.seq, c.created_at, c.forked_from,
	NULL::int, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::timestamptz
FROM r LEFT JOIN {s}.checkpoints c ON c.run_id = r.id AND c.execution = r.execution
UNION ALL
SELECT r.execution, true, a.key, NULL, NULL, NULL, a.seq, NULL, NULL,
	a.number, a.started, a.ended, a.error, a.retry_at
FROM r JOIN {s}.attempts a ON a.run_id = r.id AND a.execution = r.execution
WHERE NOT EXISTS (
	SELECT 1 FROM {s}.checkpoints c WHERE c.run_id = a.run_id AND c.execution = a.execution AND c.key = a.key
)
ORDER BY 7`

	// $1 the claim's queues. Like loadReplay, after each row's run ID, for
	// every run the current transaction's claim took: running runs whose
	// row version the transaction wrote (xmin, compared modulo 2^32 with
	// the 64-bit transaction ID), found through runs_queue_running_idx.
	q.loadClaimed = `WITH r AS (
	SELECT id, execution FROM {s}.runs
	WHERE status = 'running' AND queue = ANY($1::text[])
		AND xmin::text::bigint = pg_current_xact_id()::text::bigint % 4294967296
)
SELECT r.id, r.execution, false, c.key, c.kind, c.output, c.error, c.seq, c.created_at, c.forked_from,
	NULL::int, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::timestamptz
FROM r LEFT JOIN {s}.checkpoints c ON c.run_id = r.id AND c.execution = r.execution
UNION ALL
SELECT r.id, r.execution, true, a.key, NULL, NULL, NULL, a.seq, NULL, NULL,
	a.number, a.started, a.ended, a.error, a.retry_at
FROM r JOIN {s}.attempts a ON a.run_id = r.id AND a.execution = r.execution
WHERE NOT EXISTS (
	SELECT 1 FROM {s}.checkpoints c WHERE c.run_id = a.run_id AND c.execution = a.execution AND c.key = a.key
)
ORDER BY 1, 8`

	// $1 run, $2 execution (0: the current one). Like loadReplay, for any
	// execution, with every attempt and the attempts kept in checkpoint
	// rows, and each checkpoint's input after its attempts; the first two
	// columns are the run's current execution and the one read.
	q.history = `WITH r AS (
	SELECT id, execution AS cur, CASE WHEN $2::int = 0 THEN execution ELSE $2::int END AS ex
	FROM {s}.runs WHERE id = $1
)
SELECT r.cur, r.ex, false, c.key, c.kind, c.output, c.error, c.seq, c.created_at, c.forked_from, c.attempts, c.input,
	NULL::int, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::timestamptz
FROM r LEFT JOIN {s}.checkpoints c ON c.run_id = r.id AND c.execution = r.ex
UNION ALL
SELECT r.cur, r.ex, true, a.key, NULL, NULL, NULL, a.seq, NULL, NULL, NULL, NULL,
	a.number, a.started, a.ended, a.error, a.retry_at
FROM r JOIN {s}.attempts a ON a.run_id = r.id AND a.execution = r.ex
ORDER BY 8`

	// $1 run, $2 execution, $3 key.
	q.getCheckpoint = `SELECT {ckpt} FROM {s}.checkpoints WHERE run_id = $1 AND execution = $2 AND key = $3`

	// Checkpoints of several runs at once (each run at most once), as
	// parallel arrays: $2 run, $3 token, $4 key, $5 kind, $6 output, $7
	// error (JSON text), $8 attempts of the key (JSON text), $9 lease
	// micros; then the attempts of other keys, flattened: $10 the request's
	// ordinal, $11..$16 key, number, started, ended, error, retry_at; $17
	// the progress to publish (NULL: keep the run's), $18 whether each is
	// busy (NULL: none is), $19 each checkpoint's input (NULL: none has
	// one).
	//
	// One statement: lock the runs whose lease holds (f, in ID order),
	// insert each checkpoint into the run's current execution with its
	// attempts unless the key has one there (ins), record the other keys'
	// attempts of a written checkpoint (loose), and update the runs: forget
	// the active step, publish the progress, remove the wait when the key
	// written is one of its cases', and extend the lease or, when a pause
	// was requested and the checkpoint was written, park the run paused
	// with its lease released. Every write reads f, so nothing is written
	// for a request whose fence fails, and such a request returns no row.
	// Each row says too whether the run's cancellation is requested.
	q.checkpoint = `WITH ` + clockCTE + `,
req AS (
	SELECT * FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::bigint[], $17::bytea[], $18::bool[],
			$19::bytea[])
		WITH ORDINALITY AS q(run_id, token, key, kind, output, error, attempts, lease, progress, busy, input, ord)
),
f AS (
	SELECT r.id, r.execution, r.pause_requested, req.ord, req.lease, req.progress, coalesce(req.busy, false) AS busy,
		coalesce(r.wait_key = req.key OR req.key = ANY(r.wait_also_keys), false) AS on_wait
	FROM {s}.runs r JOIN req ON req.run_id = r.id AND req.token = r.token
	WHERE r.id = ANY($2::text[]) AND r.status = 'running'
	ORDER BY r.id
	FOR UPDATE OF r
),
ins AS (
	INSERT INTO {s}.checkpoints (run_id, execution, key, kind, output, error, attempts, created_at, input)
	SELECT req.run_id, f.execution, req.key, req.kind, req.output, req.error::jsonb, req.attempts::jsonb, clock.now, req.input
	FROM f JOIN req ON req.ord = f.ord, clock
	ON CONFLICT (run_id, execution, key) DO NOTHING
	RETURNING run_id
),
loose AS (
	INSERT INTO {s}.attempts (run_id, execution, key, number, started, ended, error, retry_at)
	SELECT f.id, f.execution, a.key, a.number, a.started, a.ended, a.error, a.retry_at
	FROM unnest($10::bigint[], $11::text[], $12::int[], $13::timestamptz[], $14::timestamptz[], $15::text[], $16::timestamptz[])
		WITH ORDINALITY AS a(req, key, number, started, ended, error, retry_at, ord)
		JOIN f ON f.ord = a.req JOIN ins ON ins.run_id = f.id
	ORDER BY a.ord
),
w AS (
	SELECT f.id, f.execution, f.ord, f.lease, f.progress, ins.run_id IS NOT NULL AS written,
		f.pause_requested AND NOT f.busy AND ins.run_id IS NOT NULL AS pause,
		f.pause_requested AND f.busy AND ins.run_id IS NOT NULL AS pause_req, f.on_wait AND ins.run_id IS NOT NULL AS unwait
	FROM f LEFT JOIN ins ON ins.run_id = f.id
)
` + checkpointUpdate("w.lease", "w.progress") + `
WHERE r.id = w.id
RETURNING w.ord, w.written, w.pause, w.execution, w.pause_req, r.cancel_reason IS NOT NULL`

	// One run's checkpoint (the one-call case of q.checkpoint, with no
	// attempts of other keys), in the same row shape: $2 run, $3 token, $4
	// key, $5 kind, $6 output, $7 error (JSON text), $8 attempts of the key
	// (JSON text), $9 lease micros, $10 progress (NULL: keep the run's),
	// $11 busy, $12 input. Scalars instead of arrays let the planner use the primary
	// key and skip the joins that match requests to runs: one run at a time
	// pays for its own row only.
	q.checkpointOne = `WITH ` + clockCTE + `,
f AS (
	SELECT r.id, r.execution, r.pause_requested, coalesce(r.wait_key = $4::text OR $4::text = ANY(r.wait_also_keys), false) AS on_wait
	FROM {s}.runs r
	WHERE r.id = $2::text AND r.token = $3::bigint AND r.status = 'running'
	FOR UPDATE
),
ins AS (
	INSERT INTO {s}.checkpoints (run_id, execution, key, kind, output, error, attempts, created_at, input)
	SELECT f.id, f.execution, $4::text, $5::text, $6::bytea, $7::text::jsonb, $8::text::jsonb, clock.now, $12::bytea
	FROM f, clock
	ON CONFLICT (run_id, execution, key) DO NOTHING
	RETURNING run_id
),
w AS (
	SELECT f.id, f.execution, ins.run_id IS NOT NULL AS written,
		f.pause_requested AND NOT $11::bool AND ins.run_id IS NOT NULL AS pause,
		f.pause_requested AND $11::bool AND ins.run_id IS NOT NULL AS pause_req, f.on_wait AND ins.run_id IS NOT NULL AS unwait
	FROM f LEFT JOIN ins ON true
)
` + checkpointUpdate("$9::bigint", "$10::bytea") + `
WHERE r.id = w.id
RETURNING 1::bigint, w.written, w.pause, w.execution, w.pause_req, r.cancel_reason IS NOT NULL`

	// $2 run, $3 token, $4 lease micros, $5..$10 attempts, stamped with the
	// run's current execution.
	q.recordAttempts = `WITH ` + clockCTE + `,
f AS (
	UPDATE {s}.runs r SET lease_until = clock.now + $4::bigint * interval '1 microsecond', {clearActive}, updated_at = clock.now
	FROM clock
	WHERE r.id = $2 AND r.status = 'running' AND r.token = $3
	RETURNING r.id, r.execution
),
att AS (
	INSERT INTO {s}.attempts (run_id, execution, key, number, started, ended, error, retry_at)
	SELECT f.id, f.execution, a.key, a.number, a.started, a.ended, a.error, a.retry_at
	FROM f, ` + attemptsFrom(5) + `
	ORDER BY a.ord
)
SELECT count(*) FROM f`

	// $2 run, $3 token, $4 lease micros, $5 active step key (NULL: keep
	// the active step), $6 its attempt, $7 its start, $8 progress (NULL:
	// keep the run's).
	q.heartbeat = `WITH ` + clockCTE + `
UPDATE {s}.runs r SET lease_until = clock.now + $4::bigint * interval '1 microsecond',
	active_key = CASE WHEN $5::text IS NULL THEN r.active_key ELSE $5::text END,
	active_attempt = CASE WHEN $5::text IS NULL THEN r.active_attempt ELSE $6::int END,
	active_started = CASE WHEN $5::text IS NULL THEN r.active_started ELSE $7::timestamptz END,
	progress = coalesce($8::bytea, r.progress),
	updated_at = clock.now
FROM clock
WHERE r.id = $2 AND r.status = 'running' AND r.token = $3
RETURNING r.pause_requested, r.cancel_reason IS NOT NULL`

	// Transactions lock the run first, then read and write with fresh
	// snapshots that see every earlier holder's committed changes.
	q.lockRun = `SELECT {runs}, coalesce($1::timestamptz, now()) FROM {s}.runs WHERE id = $2 FOR UPDATE`

	// $2 run, $3 key, $4 kind, $5 output, $6 error, $7 execution, $8
	// input.
	q.insertCkpt = `INSERT INTO {s}.checkpoints (run_id, execution, key, kind, output, error, created_at, input)
VALUES ($2, $7, $3, $4, $5, $6, coalesce($1::timestamptz, now()), $8)
ON CONFLICT (run_id, execution, key) DO NOTHING`

	// $1 run, $2 execution, $3 key: a refused event checkpoint.
	q.refuseCkpt = `DELETE FROM {s}.checkpoints WHERE run_id = $1 AND execution = $2 AND key = $3 AND kind = 'event'`

	// $1 run, $2 execution, $3 key, $4 number, $5 started, $6 ended, $7
	// error, $8 retry_at.
	q.insertAttempt = `INSERT INTO {s}.attempts (run_id, execution, key, number, started, ended, error, retry_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

	// $1 run, $2 topics: consume the oldest event buffered on any of them.
	q.takeEvent = `DELETE FROM {s}.events WHERE (run_id, topic, seq) IN (
	SELECT run_id, topic, seq FROM {s}.events WHERE run_id = $1 AND topic = ANY($2::text[]) ORDER BY seq LIMIT 1
) RETURNING topic, payload`

	// $1 run, $2 execution, $3 keys: the checkpoint of the first of the
	// keys that has one.
	q.caseCkpt = `SELECT {ckpt} FROM {s}.checkpoints WHERE run_id = $1 AND execution = $2 AND key = ANY($3::text[])
ORDER BY array_position($3::text[], key) LIMIT 1`

	// $2 run, $3 token, $4 lease micros or NULL to keep the lease, $5
	// whether a checkpoint was written, $6 progress (NULL: keep the
	// run's), $7 whether the active step stays (a TakeEvent while it
	// runs): a Suspend or TakeEvent satisfied at once.
	q.extendLease = `UPDATE {s}.runs SET
	lease_until = CASE WHEN $4::bigint IS NULL THEN lease_until
		ELSE coalesce($1::timestamptz, now()) + $4::bigint * interval '1 microsecond' END,
	recoveries = CASE WHEN $5::boolean THEN 0 ELSE recoveries END,
	progress = coalesce($6::bytea, progress),
	active_key = CASE WHEN $7::boolean THEN active_key END,
	active_attempt = CASE WHEN $7::boolean THEN active_attempt END,
	active_started = CASE WHEN $7::boolean THEN active_started END,
	updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND status = 'running' AND token = $3`

	// $2 run, $3 token, $4 status, $5 ready_at, $6 wait key, $7 topic,
	// $8 kind, $9 deadline, $10 suspend state, $11 reset recoveries; $12,
	// $13 and $14 the keys, topics and kinds of the wait's further cases
	// (NULL: none), $15 progress (NULL: keep the run's), $16 the hold
	// (JSON text, NULL: none).
	q.park = `UPDATE {s}.runs SET status = $4, ready_at = $5, wait_key = $6, wait_topic = $7, wait_kind = $8, wait_deadline = $9,
	wait_also_keys = $12, wait_also_topics = $13, wait_also_kinds = $14, progress = coalesce($15::bytea, progress), hold = $16,
	suspend_state = $10, pause_requested = false, lease_until = least(lease_until, coalesce($1::timestamptz, now())),
	recoveries = CASE WHEN $11::boolean THEN 0 ELSE recoveries END,
	{clearActive},
	updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND status = 'running' AND token = $3`

	// $2 run, $3 token, $4 status, $5 output, $6 error, $7 progress
	// (NULL: keep the run's), $8 the ended channel. Ends the run and its
	// current execution in one statement; the count is 1 when the fence
	// held.
	q.complete = `WITH ` + clockCTE + `,
upd AS (
	UPDATE {s}.runs r SET status = $4, output = $5, error = $6, progress = coalesce($7::bytea, r.progress),
		ready_at = NULL, {clearWait},
		suspend_state = NULL, pause_requested = false, lease_until = least(r.lease_until, clock.now),
		ended_at = clock.now, {clearActive}, updated_at = clock.now
	FROM clock
	WHERE r.id = $2 AND r.status = 'running' AND r.token = $3
	RETURNING r.id, r.execution, r.status, r.error, r.ended_at
),
ex AS (
	UPDATE {s}.executions e SET ended_at = upd.ended_at, status = upd.status, error = upd.error
	FROM upd WHERE e.run_id = upd.id AND e.number = upd.execution
)` + finishedCTE(notify, "upd", 8) + `
SELECT count(*) FROM upd` + finishedJoin(notify)

	// See completeManySQL.
	q.completeMany = completeManySQL(notify, false)
	q.completeRides = completeManySQL(notify, true)

	// Parks of several runs at once (each run at most once), each writing a
	// checkpoint first (a sleep's wake time) and registering no wait, as
	// parallel arrays: $2 run, $3 token, $4 key, $5 kind, $6 output, $7
	// error (JSON text), $8 ready_at, $9 suspend state, $10 progress (NULL:
	// keep the run's), $11 whether the worker saw the run's cancellation
	// (SuspendRequest.CancelSeen; NULL: not), $12 the checkpoints' inputs
	// (NULL: none has one); $13 the channel.
	// Like Suspend's transaction for such a request: for the runs whose
	// lease holds (locked in ID order), the checkpoint is written unless the
	// key has one, and the run parks paused (a pause was requested), queued
	// (ready now) or waiting, keeping any wait it had. A run whose
	// cancellation is requested, parked by a worker that has not seen it,
	// is ready now (see parkReadyAt). One row per run parked: the
	// request's ordinal and the status.
	q.parkMany = `WITH ` + clockCTE + `,
req AS (
	SELECT * FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::timestamptz[], $9::bytea[], $10::bytea[],
			$11::bool[], $12::bytea[])
		WITH ORDINALITY AS q(run_id, token, key, kind, output, error, ready_at, state, progress, seen, input, ord)
),
f AS (
	SELECT r.id, r.execution, r.pause_requested, r.cancel_reason IS NOT NULL AS cancel, req.ord
	FROM {s}.runs r JOIN req ON req.run_id = r.id AND req.token = r.token
	WHERE r.id = ANY($2::text[]) AND r.status = 'running'
	ORDER BY r.id
	FOR UPDATE OF r
),
ins AS (
	INSERT INTO {s}.checkpoints (run_id, execution, key, kind, output, error, created_at, input)
	SELECT req.run_id, f.execution, req.key, req.kind, req.output, req.error::jsonb, clock.now, req.input
	FROM f JOIN req ON req.ord = f.ord, clock
	ON CONFLICT (run_id, execution, key) DO NOTHING
	RETURNING run_id
),
p AS (
	SELECT f.id, f.ord, f.pause_requested, ins.run_id IS NOT NULL AS written, req.state, req.progress, clock.now,
		CASE WHEN f.cancel AND NOT coalesce(req.seen, false) AND (req.ready_at IS NULL OR req.ready_at > clock.now)
			THEN clock.now ELSE req.ready_at END AS ready_at
	FROM f JOIN req ON req.ord = f.ord CROSS JOIN clock LEFT JOIN ins ON ins.run_id = f.id
),
w AS (
	SELECT p.id, p.ord, p.written, p.ready_at, p.state, p.progress,
		CASE WHEN p.pause_requested THEN 'paused'
			WHEN p.ready_at IS NOT NULL AND p.ready_at <= p.now THEN 'queued'
			ELSE 'waiting' END AS status
	FROM p
),
upd AS (
	UPDATE {s}.runs r SET status = w.status, ready_at = w.ready_at, suspend_state = w.state,
		progress = coalesce(w.progress, r.progress), pause_requested = false, lease_until = least(r.lease_until, clock.now),
		recoveries = CASE WHEN w.written THEN 0 ELSE r.recoveries END,
		{clearActive},
		updated_at = clock.now
	FROM w, clock
	WHERE r.id = w.id
	RETURNING w.ord, w.status
)` + notifyCTE(notify, "upd", "status = 'queued'", 13) + `
SELECT upd.ord, upd.status FROM upd` + notifyJoin(notify)

	// $1 now, $2 run, $3 the reason: requests the cancellation of the
	// locked, unfinished run, unless one is requested already, and returns
	// its status after (no row: it was).
	q.cancel = `UPDATE {s}.runs r SET ` + cancelSet("$1::timestamptz", "$3::text") + `
WHERE r.id = $2 AND r.cancel_reason IS NULL AND r.status NOT IN {finished}
RETURNING r.status`

	// $1 now, $2 run, $3 error: terminates the locked, unfinished run and
	// ends its execution.
	q.terminate = `WITH upd AS (
	UPDATE {s}.runs SET ` + terminateSet("$1::timestamptz", "$3::jsonb") + `
	WHERE id = $2 AND status NOT IN {finished}
	RETURNING id, execution, error
),
ex AS (
	UPDATE {s}.executions e SET ended_at = $1, status = 'terminated', error = upd.error
	FROM upd WHERE e.run_id = upd.id AND e.number = upd.execution
)
SELECT id FROM upd`

	// $1 now, $2 root run, $3 error (JSON text), $4 the reason of the
	// cancellations: terminates every unfinished descendant of the root
	// and requests the cancellation of the children cancelled with their
	// parent (see cascadeFrom).
	q.cascade = cascadeFrom(`SELECT $2::text, $3::text, $4::text`, false, 0, 0)

	// Cascades of the completions of completeMany, run after it in the same
	// transaction, as parallel arrays: $2 run, $3 token, $4 status, $5 the
	// descendants' error (JSON text, NULL for none), $6 the reason of the
	// children's cancellations; $7 the ended channel, $8 the channel. The
	// roots are the runs that completeMany ended: in the request's final
	// status under its token, ended now. (A completion refused because
	// the same lease ended the run at the same instant already would pass
	// for one; that completion's cascade ran then.)
	q.cascadeMany = cascadeFrom(`SELECT req.run_id, req.err, req.why
	FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[]) AS req(run_id, token, status, err, why)
	JOIN {s}.runs r ON r.id = req.run_id AND r.token = req.token AND r.status = req.status
	WHERE req.err IS NOT NULL AND r.ended_at = (SELECT now FROM clock)`, notify, 7, 8)

	// $1 run, $2 execution, $3 key: where a restart from the key forks.
	q.forkSeq = `SELECT seq FROM {s}.checkpoints WHERE run_id = $1 AND execution = $2 AND key = $3`

	// $1 now, $2 run, $3 fork sequence number (NULL: from the top), $4
	// from key. Ends the current execution with the run's status and
	// error (keeping an earlier end), begins the next one with copies of
	// the checkpoints written before the fork point, and queues the run in
	// it with its lease revoked. A lease that has not expired (a running
	// run's, or one a restart fenced already) is kept and fences the new
	// execution: the run is ready at its expiry unless its holder lets go
	// first (see Suspend). The run's next claim is a start again
	// (first_claimed_at), which a queue's rate counts, and its
	// cancellation is no longer requested; its updates and streams stay
	// as they are, but the updates still pending whose payload no update
	// checkpoint carried into the new execution (the copies) holds are
	// buffered again ($5 is storage.UpdateTopicPrefix), in seq order,
	// after the run's buffered updates are dropped: one the ended
	// execution took without replying would never reach the new one
	// otherwise. Every CTE reads the run, its events and its checkpoints
	// as they were before the statement, so the deletion leaves the
	// events buffered again, and the copies are the ended execution's
	// checkpoints before the fork point.
	q.restart = `WITH r AS (SELECT id, execution, status, error FROM {s}.runs WHERE id = $2),
ended AS (
	UPDATE {s}.executions e SET ended_at = coalesce(e.ended_at, $1::timestamptz), status = r.status, error = r.error
	FROM r WHERE e.run_id = r.id AND e.number = r.execution
),
began AS (
	INSERT INTO {s}.executions (run_id, number, started_at, forked_from, from_key)
	SELECT r.id, r.execution + 1, $1::timestamptz, CASE WHEN $4::text = '' THEN 0 ELSE r.execution END, $4::text FROM r
),
copied AS (
	INSERT INTO {s}.checkpoints (run_id, execution, key, kind, output, error, created_at, forked_from, input)
	SELECT c.run_id, r.execution + 1, c.key, c.kind, c.output, c.error, c.created_at, r.execution, c.input
	FROM r JOIN {s}.checkpoints c ON c.run_id = r.id AND c.execution = r.execution
	WHERE c.seq < $3::bigint
	ORDER BY c.seq
),
unbuffered AS (
	DELETE FROM {s}.events e USING r WHERE e.run_id = r.id AND starts_with(e.topic, $5::text)
),
rebuffered AS (
	INSERT INTO {s}.events (run_id, topic, payload, created_at)
	SELECT u.run_id, $5::text || u.name, u.payload, $1::timestamptz
	FROM r JOIN {s}.updates u ON u.run_id = r.id
	WHERE u.state = 'pending' AND NOT EXISTS (
		SELECT 1 FROM {s}.checkpoints c
		WHERE c.run_id = r.id AND c.execution = r.execution AND c.seq < $3::bigint AND c.kind = 'update'
			AND coalesce(c.output, '') = coalesce(u.payload, '')
	)
	ORDER BY u.seq
)
UPDATE {s}.runs SET status = 'queued', ready_at = greatest($1, lease_until), execution = execution + 1, started_at = $1, ended_at = NULL,
	output = NULL, error = NULL, {clearWait}, progress = NULL, cancel_reason = NULL,
	suspend_state = NULL, pause_requested = false, recoveries = 0, first_claimed_at = NULL,
	{clearActive}, updated_at = $1
WHERE id = $2`

	// $2 run, $3 token, $4 input, $5 progress (NULL: keep the run's), $6
	// channel. Fenced by the lease in the statement that writes: locks the
	// run if the lease holds (f), ends its current execution as continued,
	// begins the next, and queues the run in it (paused if a pause was
	// requested), ready now, with its lease released and nothing of the
	// ended execution but its buffered events, parent, deadline and
	// progress (its updates and streams are the run's, in tables the
	// statement leaves alone). No row: the lease did not hold and nothing
	// was written.
	// Every CTE reads the run as it was before the statement.
	q.continueAsNew = `WITH ` + clockCTE + `,
f AS (
	SELECT r.id, r.execution FROM {s}.runs r WHERE r.id = $2 AND r.status = 'running' AND r.token = $3 FOR UPDATE
),
ended AS (
	UPDATE {s}.executions e SET ended_at = clock.now, status = 'continued', error = NULL
	FROM f, clock WHERE e.run_id = f.id AND e.number = f.execution
),
began AS (
	INSERT INTO {s}.executions (run_id, number, started_at)
	SELECT f.id, f.execution + 1, clock.now FROM f, clock
),
upd AS (
	UPDATE {s}.runs r SET status = CASE WHEN r.pause_requested THEN 'paused' ELSE 'queued' END,
		ready_at = clock.now, execution = r.execution + 1, started_at = clock.now, ended_at = NULL,
		input = $4, output = NULL, error = NULL, {clearWait}, suspend_state = NULL, pause_requested = false,
		recoveries = 0, lease_until = least(r.lease_until, clock.now), progress = coalesce($5::bytea, r.progress),
		{clearActive}, updated_at = clock.now
	FROM f, clock
	WHERE r.id = f.id
	RETURNING r.status
)` + notifyCTE(notify, "upd", "status = 'queued'", 6) + `
SELECT upd.status FROM upd` + notifyJoin(notify)

	// $1 run. One row with NULL execution columns when the run has no
	// executions recorded; no rows when there is no such run. The current
	// execution's end, status and error are the run's.
	q.executions = `SELECT e.number, e.started_at,
	CASE WHEN e.number = r.execution THEN r.ended_at ELSE e.ended_at END,
	CASE WHEN e.number = r.execution THEN r.status ELSE e.status END,
	CASE WHEN e.number = r.execution THEN r.error ELSE e.error END,
	e.forked_from, e.from_key
FROM {s}.runs r LEFT JOIN {s}.executions e ON e.run_id = r.id
WHERE r.id = $1 ORDER BY e.number`

	// $1 names, $2 versions, $3 input schemas, $4 output schemas, $5
	// workers, $6 updated, $7 queues, $8 retentions and $9 timeouts
	// (nanoseconds, NULL: none), $10 declared search attributes (JSON
	// text, NULL: none): one row per name.
	q.putWorkflows = `INSERT INTO {s}.workflow_types (name, version, input_schema, output_schema, worker, updated_at, queue, retention, timeout, attributes)
SELECT * FROM unnest($1::text[], $2::int[], $3::bytea[], $4::bytea[], $5::text[], $6::timestamptz[], $7::text[], $8::bigint[], $9::bigint[], $10::text[])
ON CONFLICT (name) DO UPDATE SET version = excluded.version, input_schema = excluded.input_schema,
	output_schema = excluded.output_schema, worker = excluded.worker, updated_at = excluded.updated_at,
	queue = excluded.queue, retention = excluded.retention, timeout = excluded.timeout, attributes = excluded.attributes`
	// $1 names, $2 concurrencies, $3 partition concurrencies, $4 rates, $5
	// rate periods (nanoseconds), $6 workers, $7 updated.
	q.putQueues = `INSERT INTO {s}.queue_types (name, concurrency, partition_concurrency, rate, rate_period, worker, updated_at)
SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::bigint[], $6::text[], $7::timestamptz[])
ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, partition_concurrency = excluded.partition_concurrency,
	rate = excluded.rate, rate_period = excluded.rate_period, worker = excluded.worker, updated_at = excluded.updated_at`
	q.getQueues = `SELECT name, concurrency, partition_concurrency, rate, rate_period, worker, updated_at
FROM {s}.queue_types ORDER BY name COLLATE "C"`
	// $1 topics, $2 payload schemas, $3 workers, $4 updated.
	q.putEvents = `INSERT INTO {s}.event_types (topic, payload_schema, worker, updated_at)
SELECT * FROM unnest($1::text[], $2::bytea[], $3::text[], $4::timestamptz[])
ON CONFLICT (topic) DO UPDATE SET payload_schema = excluded.payload_schema, worker = excluded.worker,
	updated_at = excluded.updated_at`
	q.getWorkflows = `SELECT name, version, input_schema, output_schema, worker, updated_at, queue, retention, timeout, attributes
FROM {s}.workflow_types ORDER BY name COLLATE "C"`
	q.getEvents = `SELECT topic, payload_schema, worker, updated_at FROM {s}.event_types ORDER BY topic COLLATE "C"`

	// $2 topic, $3 payload, $4 channel. Locks the runs waiting on the
	// topic in any case of their wait, found through runs_wait_topic_idx
	// (the first case) and runs_wait_also_idx (the others), in ID order (a
	// run whose wait changed meanwhile is rechecked and skipped); writes
	// the checkpoint of the topic's case into the run's current execution
	// unless the key has one there, removes the whole wait and wakes the
	// run as the deliver statement does. A case without a kind writes an
	// event checkpoint, as storage.WaitCase.DeliveryKind says.
	q.emit = `WITH ` + clockCTE + `,
w AS (
	SELECT id, execution,
		CASE WHEN wait_topic = $2 THEN wait_key ELSE wait_also_keys[array_position(wait_also_topics, $2::text)] END AS wait_key,
		CASE WHEN wait_topic = $2 THEN wait_kind ELSE wait_also_kinds[array_position(wait_also_topics, $2::text)] END AS wait_kind
	FROM {s}.runs WHERE wait_topic = $2 OR wait_also_topics @> ARRAY[$2::text]
	ORDER BY id FOR UPDATE
),
ins AS (
	INSERT INTO {s}.checkpoints (run_id, execution, key, kind, output, created_at)
	SELECT w.id, w.execution, w.wait_key, coalesce(nullif(w.wait_kind, ''), 'event'), $3::bytea, clock.now FROM w, clock
	ON CONFLICT (run_id, execution, key) DO NOTHING
	RETURNING run_id
),
upd AS (
	UPDATE {s}.runs r SET ` + wake("clock.now", "ins.run_id IS NOT NULL") + `
	FROM clock, w LEFT JOIN ins ON ins.run_id = w.id
	WHERE r.id = w.id
	RETURNING r.id, r.status
)` + notifyCTE(notify, "upd", "upd.status = 'queued'", 4) + `
SELECT upd.id FROM upd` + notifyJoin(notify) + ` ORDER BY upd.id`

	// $2 run, $3 topic, $4 payload.
	q.bufferEvent = `INSERT INTO {s}.events (run_id, topic, payload, created_at) VALUES ($2, $3, $4, coalesce($1::timestamptz, now()))`

	// $2 run, $3 whether the checkpoint was written: delivery to a locked
	// run waiting on the event's topic.
	q.deliver = `UPDATE {s}.runs r SET ` + wake("coalesce($1::timestamptz, now())", "$3::boolean") + `
WHERE r.id = $2`

	q.notify = `SELECT pg_notify($1, '')`

	// $2 queues. Each named queue's unfinished runs by state, in the order
	// named, and the microseconds since the earliest ready time of its
	// ready runs (NULL: none), through runs_queue_idx, whose entries carry
	// the ready time: the counts and the minimum are one pass over the
	// queue's unfinished runs, and finished runs are not read.
	q.queueStats = `WITH ` + clockCTE + `,
q AS (SELECT * FROM unnest($2::text[]) WITH ORDINALITY q(name, ord))
SELECT q.name,
	count(r.status) FILTER (WHERE r.status = 'queued' AND r.ready_at <= clock.now),
	count(r.status) FILTER (WHERE r.status = 'queued' AND (r.ready_at IS NULL OR r.ready_at > clock.now)),
	count(r.status) FILTER (WHERE r.status = 'running'),
	count(r.status) FILTER (WHERE r.status = 'waiting'),
	count(r.status) FILTER (WHERE r.status = 'paused'),
	(extract(epoch FROM clock.now - min(r.ready_at) FILTER (WHERE r.status = 'queued' AND r.ready_at <= clock.now)) * 1000000)::bigint
FROM q CROSS JOIN clock
	LEFT JOIN {s}.runs r ON r.queue = q.name AND r.ended_at IS NULL AND r.status IN ('queued', 'running', 'waiting', 'paused')
GROUP BY q.ord, q.name, clock.now
ORDER BY q.ord`

	// $2..$18 the schedule's columns from workflow to last_run_id, in
	// schedColumns order after id ($2 is the ID): a new schedule at
	// revision 1, or no row when the ID is taken.
	q.insertSchedule = `INSERT INTO {s}.schedules (` + schedColumns + `)
VALUES ($2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
	1, coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()))
ON CONFLICT (id) DO NOTHING
RETURNING {sched}`

	// As insertSchedule, $19 the revision the stored schedule must have.
	// The first column says whether it was written; otherwise the row is
	// the stored schedule (a conflict), and no row means no such schedule.
	q.updateSchedule = `WITH upd AS (
	UPDATE {s}.schedules SET workflow = $3, cron = $4, time_zone = $5, input = $6, queue = $7, partition = $8,
		priority = $9, overlap = $10, catch_up = $11, catch_up_window = $12, paused = $13, next_fire_at = $14,
		check_at = $15, held = $16, last_fire_at = $17, last_run_id = $18,
		revision = revision + 1, updated_at = coalesce($1::timestamptz, now())
	WHERE id = $2 AND revision = $19
	RETURNING {sched}
)
SELECT true, {sched} FROM upd
UNION ALL
SELECT false, {sched} FROM {s}.schedules WHERE id = $2 AND NOT EXISTS (SELECT 1 FROM upd)`

	q.getSchedule = `SELECT {sched} FROM {s}.schedules WHERE id = $1`
	// $1 cursor, $2 limit: by ID (the primary key, in byte order).
	q.listSchedules = `SELECT {sched} FROM {s}.schedules WHERE id > $1 ORDER BY id LIMIT $2`
	// $1 due time, $2 limit: through schedules_due_idx.
	q.dueSchedules = `SELECT {sched} FROM {s}.schedules WHERE NOT paused AND check_at <= $1 ORDER BY check_at, id LIMIT $2`
	q.deleteSchedule = `DELETE FROM {s}.schedules WHERE id = $1`

	// Purge ($1..$5 as purgeVictims): locks the victims, skipping any run
	// another transaction holds (a claim, a write, another purge), and
	// deletes them with their executions, checkpoints, attempts, buffered
	// events, the start-key records naming them, their updates, their
	// streams and their search attributes, in one statement. A victim
	// changed since the snapshot (restarted, say) is rechecked when
	// locked and passed over. Counts the runs and events deleted.
	q.purge = `WITH victims AS (
	` + purgeVictims + `
	FOR UPDATE SKIP LOCKED
),
gone AS (DELETE FROM {s}.runs r USING victims v WHERE r.id = v.id RETURNING r.id),
ex AS (DELETE FROM {s}.executions e USING gone g WHERE e.run_id = g.id),
ck AS (DELETE FROM {s}.checkpoints c USING gone g WHERE c.run_id = g.id),
at AS (DELETE FROM {s}.attempts a USING gone g WHERE a.run_id = g.id),
ev AS (DELETE FROM {s}.events e USING gone g WHERE e.run_id = g.id RETURNING 1),
sk AS (DELETE FROM {s}.start_keys k USING gone g WHERE k.run_id = g.id),
up AS (DELETE FROM {s}.updates u USING gone g WHERE u.run_id = g.id),
sm AS (DELETE FROM {s}.streams m USING gone g WHERE m.run_id = g.id),
sv AS (DELETE FROM {s}.stream_values v USING gone g WHERE v.run_id = g.id),
sa AS (DELETE FROM {s}.run_attrs a USING gone g WHERE a.run_id = g.id)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM ev)`

	// A dry purge: what purge would delete, counted, locking nothing.
	q.purgeDry = `WITH victims AS (
	` + purgeVictims + `
)
SELECT (SELECT count(*) FROM victims), (SELECT count(*) FROM {s}.events e WHERE e.run_id IN (SELECT id FROM victims))`

	// $1 channel, $2 the IDs of runs that ended (see Finished).
	q.notifyFinished = `SELECT pg_notify($1, id) FROM unnest($2::text[]) id`

	// $2 ID, $3 host, $4 PID, $5 start, $6 queues, $7 workflows, $8 runs
	// in flight, $9 TTL micros, $10 codec key IDs, $11 missing key IDs
	// (NULL for none): the worker's record, replaced whole, stamped with
	// the clock.
	q.putWorker = `INSERT INTO {s}.workers (id, host, pid, started_at, queues, workflows, in_flight, heartbeat, expires_at, key_ids, missing_key_ids)
SELECT $2, $3, $4, $5, $6, $7, $8, clock.now, clock.now + $9::bigint * interval '1 microsecond', $10::text[], $11::text[]
FROM (SELECT coalesce($1::timestamptz, now()) AS now) clock
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
	queues = excluded.queues, workflows = excluded.workflows, in_flight = excluded.in_flight,
	heartbeat = excluded.heartbeat, expires_at = excluded.expires_at,
	key_ids = excluded.key_ids, missing_key_ids = excluded.missing_key_ids`
	// The records expired by the clock, deleted; one another statement
	// holds (a put of the worker, a concurrent deletion) is skipped, not
	// waited for: it is never listed, and goes next time.
	q.expireWorkers = `DELETE FROM {s}.workers WHERE id IN (
	SELECT id FROM {s}.workers WHERE expires_at <= coalesce($1::timestamptz, now()) FOR UPDATE SKIP LOCKED
)`
	// The live records, by ID (the primary key, in byte order).
	q.listWorkers = `SELECT id, host, pid, started_at, queues, workflows, in_flight, heartbeat, expires_at, key_ids, missing_key_ids
FROM {s}.workers WHERE expires_at > coalesce($1::timestamptz, now()) ORDER BY id`
	q.removeWorker = `DELETE FROM {s}.workers WHERE id = $1`

	startQueries(&q, notify)
	interactQueries(&q, notify)
	attrQueries(&q)

	for _, p := range []*string{
		&q.createRuns, &q.createLeased, &q.selectRuns, &q.getRun, &q.countRuns, &q.countRunsOf, &q.claim, &q.claimOne, &q.nextWake, &q.nextWakeOne, &q.loadReplay, &q.loadClaimed, &q.getCheckpoint,
		&q.checkpoint, &q.checkpointOne, &q.recordAttempts, &q.heartbeat, &q.lockRun, &q.insertCkpt, &q.refuseCkpt, &q.insertAttempt,
		&q.takeEvent, &q.extendLease, &q.park, &q.complete, &q.completeMany, &q.completeRides, &q.parkMany, &q.emit, &q.bufferEvent, &q.deliver, &q.history,
		&q.terminate, &q.cascade, &q.cascadeMany, &q.cancel, &q.forkSeq, &q.restart, &q.executions, &q.continueAsNew, &q.caseCkpt,
		&q.putWorkflows, &q.putEvents, &q.getWorkflows, &q.getEvents,
		&q.claimCandidates, &q.claimPicked, &q.lockQueues, &q.queuePlaces, &q.queueStarts, &q.recordStarts,
		&q.queueStats, &q.putQueues, &q.getQueues, &q.insertSchedule, &q.updateSchedule, &q.getSchedule,
		&q.listSchedules, &q.dueSchedules, &q.deleteSchedule, &q.purge, &q.purgeDry,
		&q.putWorker, &q.expireWorkers, &q.listWorkers, &q.removeWorker,
		&q.readRun, &q.txNow, &q.lockKey, &q.getKey, &q.putKey, &q.joinInput, &q.family, &q.dropFamily, &q.resetRun,
		&q.sendUpdate, &q.getUpdate, &q.listUpdates, &q.replyCheck, &q.interact, &q.readStream, &q.listStreams,
		&q.createAttrs, &q.createBoth, &q.setAttrs, &q.insertAttrs, &q.deleteAttrs,
	} {
		*p = r.Replace(*p)
	}
	return q
}

// terminateSet is the SET list that terminates a run at now with errJSON:
// no output, wait, ready time, suspend state, pause request or active
// step, its lease released and its execution ended.
func terminateSet(now, errJSON string) string {
	return `status = 'terminated', output = NULL, error = ` + errJSON + `,
		ready_at = NULL, {clearWait},
		suspend_state = NULL, pause_requested = false, lease_until = least(lease_until, ` + now + `),
		ended_at = ` + now + `, {clearActive}, updated_at = ` + now
}

// cascadeFrom is a statement that terminates at $1 (NULL: now()) every
// unfinished descendant of the roots, a row source of (root run, error of
// its descendants as JSON text, reason of their cancellations), reached
// through children whose parent policy is to terminate with the parent
// (an abandoning child is not entered, so its own children are left alone
// too), and requests the cancellation of every unfinished child of a root
// or of such a descendant (finished or not) whose policy is to be
// cancelled with its parent (its own children are left to its ending),
// locking them all in ID order; a descendant of two roots gets either's
// error or reason. Its rows are the IDs it terminated, in order, then
// those of the runs whose cancellation it requested and made ready to
// claim now (waiting runs woken, see cancelSet), each with whether it is
// one of the latter. When notify is set, it announces each run terminated
// on the ended channel, parameter channel, and a run made ready on the
// channel, parameter wake.
func cascadeFrom(roots string, notify bool, channel, wake int) string {
	return `WITH RECURSIVE ` + clockCTE + `,
roots(id, err, why) AS (
	` + roots + `
),
tree(id, err, why) AS (
	SELECT c.id, roots.err, roots.why FROM {s}.runs c JOIN roots ON c.parent_id = roots.id WHERE c.parent_id <> '' AND c.parent_policy = ''
	UNION
	SELECT c.id, tree.err, tree.why FROM {s}.runs c JOIN tree ON c.parent_id = tree.id WHERE c.parent_id <> '' AND c.parent_policy = ''
),
kids(id, why) AS (
	SELECT c.id, p.why FROM {s}.runs c JOIN (SELECT id, why FROM roots UNION ALL SELECT id, why FROM tree) p ON c.parent_id = p.id
	WHERE c.parent_id <> '' AND c.parent_policy = 'cancel'
),
lk AS (
	SELECT r.id FROM {s}.runs r
	WHERE (r.id IN (SELECT id FROM tree) OR r.id IN (SELECT id FROM kids)) AND r.status NOT IN {finished}
	ORDER BY r.id
	FOR UPDATE OF r
),
upd AS (
	UPDATE {s}.runs r SET ` + terminateSet("clock.now", "(SELECT min(tree.err) FROM tree WHERE tree.id = r.id)::jsonb") + `
	FROM lk, clock WHERE r.id = lk.id AND r.parent_policy = '' AND r.status NOT IN {finished}
	RETURNING r.id, r.execution, r.error, r.ended_at
),
cancelled AS (
	UPDATE {s}.runs r SET ` + cancelSet("clock.now", "(SELECT min(kids.why) FROM kids WHERE kids.id = r.id)") + `
	FROM lk, clock WHERE r.id = lk.id AND r.parent_policy = 'cancel' AND r.status NOT IN {finished} AND r.cancel_reason IS NULL
	RETURNING r.id, r.status
),
ex AS (
	UPDATE {s}.executions e SET ended_at = upd.ended_at, status = 'terminated', error = upd.error
	FROM upd WHERE e.run_id = upd.id AND e.number = upd.execution
)` + finishedCTE(notify, "upd", channel) + notifyCTE(notify, "cancelled", "status = 'queued'", wake) + `
SELECT x.id, x.woken FROM (
	SELECT id, false AS woken FROM upd
	UNION ALL
	SELECT id, true FROM cancelled WHERE status = 'queued'
) x` + notifyJoin(notify) + finishedWhere(notify) + ` ORDER BY x.woken, x.id`
}

// cancelSet is the SET list, on a run r, that records at now the
// cancellation requested with reason: a waiting run not held becomes
// queued, ready now (its wait stays registered), a paused one not held is
// ready now, for when it is resumed, and a queued or running one keeps its
// status and ready time.
func cancelSet(now, reason string) string {
	return `cancel_reason = ` + reason + `,
		status = CASE WHEN r.status = 'waiting' AND r.hold IS NULL THEN 'queued' ELSE r.status END,
		ready_at = CASE WHEN r.status IN ('waiting', 'paused') AND r.hold IS NULL THEN ` + now + ` ELSE r.ready_at END,
		updated_at = ` + now
}

// notifyCTE is a CTE named notify that sends one notification on channel
// parameter $param when source has a row matching cond. It runs only if
// the main query reads it, which notifyJoin arranges.
func notifyCTE(enabled bool, source, cond string, param int) string {
	if !enabled {
		return ""
	}
	return `,
notify AS (
	SELECT pg_notify($` + strconv.Itoa(param) + `::text, '') FROM (SELECT 1 FROM ` + source + ` WHERE ` + cond + ` LIMIT 1) one
)`
}

// finishedCTE notifies, when enabled, that the runs in source ended: one
// notification each, with the ID as payload, on the channel in parameter
// param (the store's ended channel).
func finishedCTE(enabled bool, source string, param int) string {
	if !enabled {
		return ""
	}
	return `,
finished AS (
	SELECT pg_notify($` + strconv.Itoa(param) + `::text, id) FROM ` + source + `
)`
}

// finishedWhere makes a query of many rows send finishedCTE's
// notifications, where finishedJoin would repeat each row per
// notification.
func finishedWhere(enabled bool) string {
	if !enabled {
		return ""
	}
	return ` WHERE (SELECT count(*) FROM finished) >= 0`
}

func finishedJoin(enabled bool) string {
	if !enabled {
		return ""
	}
	return ` LEFT JOIN finished ON true`
}

func notifyJoin(enabled bool) string {
	if !enabled {
		return ""
	}
	return ` LEFT JOIN notify ON true`
}

// wake is the SET list of a delivery: the wait is removed, a waiting (or
// queued) run becomes queued and ready no later than now, a paused run stays
// paused but ready now, a running run keeps running. Writing the checkpoint
// (when written is true) resets the recovery count.
func wake(now, written string) string {
	return `{clearWait},
		status = CASE WHEN r.status IN ('waiting', 'queued') THEN 'queued' ELSE r.status END,
		ready_at = CASE
			WHEN r.status = 'paused' THEN ` + now + `
			WHEN r.status IN ('waiting', 'queued') AND (r.ready_at IS NULL OR r.ready_at > ` + now + `) THEN ` + now + `
			ELSE r.ready_at END,
		recoveries = CASE WHEN ` + written + ` THEN 0 ELSE r.recoveries END,
		updated_at = ` + now
}

// startQueries fills in the statements of the creates that carry a start
// policy, an event or a start key, and of the transactional store (see
// start.go and tx.go).
func startQueries(q *queries, notify bool) {
	// A run read as lockRun reads it, locking nothing: the creates that
	// only return or refuse what they find.
	q.readRun = `SELECT {runs}, coalesce($1::timestamptz, now()) FROM {s}.runs WHERE id = $2`

	// The store clock's time of a call in a transaction, read once and
	// passed to each of its statements: the time of the call's first
	// statement rather than of the transaction's start (now()), which an
	// application's transaction may have begun long before.
	q.txNow = `SELECT coalesce($1::timestamptz, statement_timestamp())`

	// $1 the key's name (see keyLock): a transaction-level advisory lock
	// that makes the creates of one start key take turns, across every
	// process, from before they read its record until they commit.
	q.lockKey = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`

	// $1 workflow, $2 key: the run holding the key.
	q.getKey = `SELECT run_id FROM {s}.start_keys WHERE workflow = $1 AND key = $2`

	// $1 workflow, $2 key, $3 run: the run created with the key holds it.
	q.putKey = `INSERT INTO {s}.start_keys (workflow, key, run_id) VALUES ($1, $2, $3)
ON CONFLICT (workflow, key) DO UPDATE SET run_id = excluded.run_id`

	// $1 now, $2 run, $3 input, $4 headers (JSON text, NULL: none), $5
	// search attributes (runs.attrs's JSON text, NULL: none): a debounce
	// window's run takes the input, headers and attributes of a create
	// that joins it (whose rows deleteAttrs and insertAttrs replace).
	q.joinInput = `UPDATE {s}.runs SET input = $3, headers = $4, attrs = $5::jsonb, updated_at = $1 WHERE id = $2`

	// $1 run: every descendant of the run, finished or not, through
	// runs_parent_idx, locked in ID order (as Terminate's cascade locks
	// them), with its status and parent policy.
	q.family = `WITH RECURSIVE tree(id) AS (
	SELECT c.id FROM {s}.runs c WHERE c.parent_id = $1 AND c.parent_id <> ''
	UNION
	SELECT c.id FROM {s}.runs c JOIN tree ON c.parent_id = tree.id WHERE c.parent_id <> ''
)
SELECT r.id, r.status, r.parent_policy FROM {s}.runs r WHERE r.id IN (SELECT id FROM tree)
ORDER BY r.id
FOR UPDATE OF r`

	// $1 the replaced run and its descendants, $2 the descendants: deletes
	// everything they own, as Purge does (executions, checkpoints,
	// attempts, buffered events, start-key records, updates, streams,
	// search attributes), and
	// the descendants' rows, keeping the token of each that was ever
	// claimed in run_tokens (the greater, should its ID have an entry
	// already), in ID order: the next run created under its ID goes on
	// from it (see createSQL), so that a holder of the deleted run's lease
	// never matches a lease of that run. The replaced run's row stays, for
	// resetRun, with its token.
	q.dropFamily = `WITH ck AS (DELETE FROM {s}.checkpoints WHERE run_id = ANY($1::text[])),
at AS (DELETE FROM {s}.attempts WHERE run_id = ANY($1::text[])),
ev AS (DELETE FROM {s}.events WHERE run_id = ANY($1::text[])),
ex AS (DELETE FROM {s}.executions WHERE run_id = ANY($1::text[])),
sk AS (DELETE FROM {s}.start_keys WHERE run_id = ANY($1::text[])),
up AS (DELETE FROM {s}.updates WHERE run_id = ANY($1::text[])),
sm AS (DELETE FROM {s}.streams WHERE run_id = ANY($1::text[])),
sv AS (DELETE FROM {s}.stream_values WHERE run_id = ANY($1::text[])),
sa AS (DELETE FROM {s}.run_attrs WHERE run_id = ANY($1::text[])),
gone AS (DELETE FROM {s}.runs WHERE id = ANY($2::text[]) RETURNING id, token)
INSERT INTO {s}.run_tokens AS k (id, token)
SELECT id, token FROM gone WHERE token > 0 ORDER BY id
ON CONFLICT (id) DO UPDATE SET token = greatest(k.token, excluded.token)`

	// resetRun makes the locked row of a replaced run the new run of its
	// ID, after dropFamily: $1 now, $2 ID, $3 workflow, $4 parent policy,
	// $5 input, $6 start time (NULL: now), $7 deadline, $8 queue, $9
	// partition, $10 priority, $11 workflow version, $12 headers (JSON
	// text, NULL: none), $13 lease owner (NULL: not leased), $14 its lease
	// in microseconds, $15 the queues whose starts are recorded (see
	// Store.rated), $16 search attributes (runs.attrs's JSON text, NULL:
	// none; their rows are insertAttrs's), $17 the channel. Every column
	// takes the value
	// createSQL gives a new run, but the fencing token, which the new run
	// keeps (one more when it is created leased), so that a lease of the
	// old run never fences a write to the new one. The row is updated in
	// place, not deleted and inserted again: a statement waiting for its
	// lock (a SendEvent, a fenced write) then finds the new run, where a
	// deleted row would be no run at all. The new run's first execution is
	// recorded, a leased run's start too when its queue is one of $15, and
	// a run created ready is announced. Returns the new record.
	q.resetRun = `WITH upd AS (
	UPDATE {s}.runs r SET workflow = $3, parent_id = '', parent_policy = $4,
		status = CASE WHEN $13::text IS NULL THEN 'queued' ELSE 'running' END,
		input = $5, output = NULL, error = NULL, pause_requested = false,
		ready_at = CASE WHEN $13::text IS NULL THEN greatest($1::timestamptz, coalesce($6::timestamptz, $1::timestamptz)) END,
		{clearWait}, owner = coalesce($13::text, ''),
		lease_until = CASE WHEN $13::text IS NOT NULL THEN $1::timestamptz + $14::bigint * interval '1 microsecond' END,
		token = CASE WHEN $13::text IS NULL THEN r.token ELSE r.token + 1 END,
		recoveries = 0, suspend_state = NULL, execution = 1, started_at = $1, ended_at = NULL,
		{clearActive}, created_at = $1, updated_at = $1, deadline = $7, progress = NULL,
		queue = $8, partition = $9, priority = $10, version = $11, headers = $12, hold = NULL, cancel_reason = NULL, attrs = $16::jsonb,
		first_claimed_at = CASE WHEN $13::text IS NOT NULL THEN $1::timestamptz END
	WHERE r.id = $2
	RETURNING {r.runs}
),
ex AS (
	INSERT INTO {s}.executions (run_id, number, started_at) SELECT id, 1, started_at FROM upd
),
st AS (
	INSERT INTO {s}.queue_starts (queue, at) SELECT upd.queue, $1 FROM upd WHERE upd.status = 'running' AND upd.queue = ANY($15::text[])
)` + notifyCTE(notify, "upd", "status = 'queued'", 17) + `
SELECT ` + cols("upd") + ` FROM upd` + notifyJoin(notify)
}

// updateColumns are the columns scanUpdate reads, in its order.
const updateColumns = `run_id, id, name, payload, headers, seq, state, reply, error, created_at, replied_at`

// writtenHere is the condition on a request q (run_id, key) of a
// statement that follows a checkpoint statement in its transaction: the
// checkpoint of q's key in the run's current execution was written by
// this transaction (its row's xmin, compared modulo 2^32 with the 64-bit
// transaction ID, as completeRides compares it), or the caller knows it
// was (parameter known).
func writtenHere(q, known string) string {
	return `(coalesce(` + known + `::boolean, false) OR EXISTS (
		SELECT 1 FROM {s}.runs r JOIN {s}.checkpoints c ON c.run_id = r.id AND c.execution = r.execution
		WHERE r.id = ` + q + `.run_id AND c.key = ` + q + `.key
			AND c.xmin::text::bigint = pg_current_xact_id()::text::bigint % 4294967296))`
}

// interactQueries fills in the statements of updates and streams (see
// interact.go).
func interactQueries(q *queries, notify bool) {
	// $1 now, $2 run (locked), $3 update ID, $4 name, $5 payload, $6
	// headers (JSON text, NULL: none), $7 whether the run may take a new
	// update (it has not ended). Records the update pending with the
	// run's next sequence number, unless the run has one of the ID or has
	// ended; returns the update recorded (true) or the one of the ID
	// recorded before (false), which the statement's snapshot sees: every
	// update of the run is recorded under its lock. No row: neither.
	q.sendUpdate = `WITH ins AS (
	INSERT INTO {s}.updates (run_id, id, seq, name, payload, headers, state, created_at)
	SELECT $2::text, $3::text, coalesce((SELECT max(seq) FROM {s}.updates WHERE run_id = $2::text), 0) + 1,
		$4::text, $5::bytea, $6::text, 'pending', $1::timestamptz
	WHERE $7::boolean
	ON CONFLICT (run_id, id) DO NOTHING
	RETURNING {upd}
)
SELECT true, {upd} FROM ins
UNION ALL
SELECT false, {upd} FROM {s}.updates WHERE run_id = $2::text AND id = $3::text`

	// $1 run, $2 update ID.
	q.getUpdate = `SELECT {upd} FROM {s}.updates WHERE run_id = $1 AND id = $2`

	// $1 run, $2 after, $3 limit: through updates_seq_idx.
	q.listUpdates = `SELECT {upd} FROM {s}.updates WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`

	// $1 run, $2 token, $3 update ID: whether the lease holds and whether
	// the run has the update a checkpoint replies to. No row: no such run.
	q.replyCheck = `SELECT r.status = 'running' AND r.token = $2::bigint,
	EXISTS (SELECT 1 FROM {s}.updates u WHERE u.run_id = $1 AND u.id = $3::text)
FROM {s}.runs r WHERE r.id = $1`

	// What checkpoints carry for their runs' updates and streams, written
	// after the checkpoint statement in its transaction, for the
	// checkpoints it wrote (writtenHere, $2 known): a checkpoint that
	// existed writes nothing here. $1 the clock.
	//
	// Replies, one per checkpoint: $3 run, $4 checkpoint key, $5 update
	// ID, $6 output, $7 error (JSON text), $8 the announcement. The update
	// becomes replied unless it was already (the first reply stands).
	//
	// Stream writes, merged per checkpoint and stream: $9 run, $10
	// checkpoint key, $11 stream, $12 how many values the checkpoint
	// appends to it, $13 whether it is closed after them, $14 the
	// announcement. Each upserts the stream's row, its length grown by
	// the values appended, and so takes the offsets from its old length
	// on; the rows are upserted in (run, stream) order.
	//
	// Values, flattened: $15 the ordinal of their write in $9.., $16 their
	// index among the values the checkpoint appends to that stream, $17
	// the value. One statement writes every value of every checkpoint.
	//
	// With notify, $18 is the ended channel: each reply written and each
	// stream written is announced on it, in the transaction.
	q.interact = `WITH ` + clockCTE + `,
rq AS (
	SELECT q.* FROM unnest($3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::text[])
		AS q(run_id, key, id, output, error, said)
	WHERE ` + writtenHere("q", "$2") + `
),
rep AS (
	UPDATE {s}.updates u SET state = 'replied', reply = rq.output, error = rq.error::jsonb, replied_at = clock.now
	FROM rq, clock
	WHERE u.run_id = rq.run_id AND u.id = rq.id AND u.state = 'pending'
	RETURNING rq.said
),
sq AS (
	SELECT q.* FROM unnest($9::text[], $10::text[], $11::text[], $12::bigint[], $13::boolean[], $14::text[])
		WITH ORDINALITY AS q(run_id, key, stream, n, closed, said, ord)
	WHERE ` + writtenHere("q", "$2") + `
),
meta AS (
	INSERT INTO {s}.streams AS m (run_id, stream, length, closed, updated_at)
	SELECT sq.run_id, sq.stream, sq.n, sq.closed, clock.now FROM sq, clock
	ORDER BY sq.run_id, sq.stream
	ON CONFLICT (run_id, stream) DO UPDATE SET length = m.length + excluded.length, closed = excluded.closed,
		updated_at = excluded.updated_at
	RETURNING m.run_id, m.stream, m.length
),
vals AS (
	INSERT INTO {s}.stream_values (run_id, stream, "offset", value, written_at)
	SELECT sq.run_id, sq.stream, meta.length - sq.n + v.k, v.value, clock.now
	FROM unnest($15::bigint[], $16::bigint[], $17::bytea[]) AS v(agg, k, value)
		JOIN sq ON sq.ord = v.agg
		JOIN meta ON meta.run_id = sq.run_id AND meta.stream = sq.stream
		CROSS JOIN clock
)` + announceCTE(notify, 18) + `
SELECT (SELECT count(*) FROM rep), (SELECT count(*) FROM meta)` + announceWhere(notify)

	// $1 run, $2 stream, $3 from, $4 limit. The run's status, the
	// stream's length and whether it is closed (NULL: never written), and
	// its values from offset $3 on, at most $4, a range of
	// stream_values_pkey: one statement, so one snapshot. A row per value,
	// or one with NULL value columns when there is none; no row: no such
	// run.
	q.readStream = `SELECT r.status, m.length, m.closed, v."offset", v.value, v.written_at
FROM {s}.runs r
	LEFT JOIN {s}.streams m ON m.run_id = r.id AND m.stream = $2::text
	LEFT JOIN LATERAL (
		SELECT x."offset", x.value, x.written_at FROM {s}.stream_values x
		WHERE x.run_id = r.id AND x.stream = $2::text AND x."offset" >= $3::bigint
		ORDER BY x."offset"
		LIMIT $4
	) v ON true
WHERE r.id = $1`

	// $1 run: its streams by name, or one row of NULLs when it has none;
	// no row: no such run.
	q.listStreams = `SELECT m.stream, m.length, m.closed, m.updated_at
FROM {s}.runs r LEFT JOIN {s}.streams m ON m.run_id = r.id
WHERE r.id = $1
ORDER BY m.stream`
}

// announceCTE announces, when enabled, on the channel in parameter param
// (the store's ended channel), each reply and stream write of the
// interact statement (the announcement of each row of rep and sq).
func announceCTE(enabled bool, param int) string {
	if !enabled {
		return ""
	}
	return `,
said AS (
	SELECT pg_notify($` + strconv.Itoa(param) + `::text, x.said) FROM (SELECT said FROM rep UNION ALL SELECT said FROM sq) x
)`
}

// announceWhere makes the interact statement send announceCTE's
// notifications.
func announceWhere(enabled bool) string {
	if !enabled {
		return ""
	}
	return ` WHERE (SELECT count(*) FROM said) >= 0`
}

// attrQueries fills in the statements that write search attributes after
// a checkpoint or a replacement (see attrs.go).
func attrQueries(q *queries) {
	// What checkpoints carry for their runs' search attributes
	// (storage.CheckpointRequest.Attributes), merged after the checkpoint
	// statement in its transaction, for the checkpoints it wrote
	// (writtenHere, $1 known): a checkpoint that existed merges nothing.
	// $2 run, $3 checkpoint key and $4 the attributes as runs.attrs holds
	// them (JSON text), one per checkpoint that carries attributes;
	// $5..$10 the attributes' rows (attrsFrom); $11 the most a run holds
	// (storage.MaxAttributes). The run's object takes the new names'
	// entries (jsonb ||: a name set replaces the value, and so the type,
	// it had), and its rows likewise; a new row takes the run's creation
	// time. A run that would hold more than $11 names fails the statement
	// (refuse_attributes), and with it the transaction, which so writes
	// nothing. Every run here is locked by the checkpoint statement,
	// whose writes this statement's snapshot sees; its row is updated
	// again here, heap-only (attrs is in no index).
	q.setAttrs = `WITH rq AS (
	SELECT q.run_id, q.attrs FROM unnest($2::text[], $3::text[], $4::text[]) AS q(run_id, key, attrs)
	WHERE ` + writtenHere("q", "$1") + `
),
merged AS (
	SELECT r.id, coalesce(r.attrs, '{}'::jsonb) || rq.attrs::jsonb AS attrs
	FROM rq JOIN {s}.runs r ON r.id = rq.run_id
),
refused AS (
	SELECT {s}.refuse_attributes(m.id, n.n, $11::int)
	FROM merged m, LATERAL (SELECT count(*) AS n FROM jsonb_object_keys(m.attrs)) n
	WHERE n.n > $11::int
),
upd AS (
	UPDATE {s}.runs r SET attrs = merged.attrs FROM merged WHERE r.id = merged.id
	RETURNING r.id, r.created_at
),
up AS (
	INSERT INTO {s}.run_attrs AS a (run_id, name, str, num, at, flag, created_at)
	SELECT v.run_id, v.name, v.str, v.num, v.at, v.flag, upd.created_at
	FROM ` + attrsFrom(5) + ` JOIN upd ON upd.id = v.run_id
	ORDER BY v.run_id, v.name
	ON CONFLICT (run_id, name) DO UPDATE SET str = excluded.str, num = excluded.num, at = excluded.at, flag = excluded.flag
)
SELECT count(*) FROM refused`

	// $1..$6 the attributes (attrsFrom) of a run whose attributes a
	// create replaces, after its statement deleted the old ones: the run
	// a replacement created (resetRun, after dropFamily), or the run of a
	// debounce window that a create joined (joinInput, after
	// deleteAttrs). They take the run's creation time, which its row
	// holds by then.
	q.insertAttrs = `INSERT INTO {s}.run_attrs (run_id, name, str, num, at, flag, created_at)
SELECT v.run_id, v.name, v.str, v.num, v.at, v.flag, r.created_at FROM ` + attrsFrom(1) + ` JOIN {s}.runs r ON r.id = v.run_id`

	// $1 run: its attributes, which a joining create replaces.
	q.deleteAttrs = `DELETE FROM {s}.run_attrs WHERE run_id = $1`
}
