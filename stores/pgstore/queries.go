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
	selectRuns     string
	getRun         string
	claim          string
	loadCheckpoint string
	getCheckpoint  string
	checkpoint     string
	recordAttempts string
	heartbeat      string
	lockRun        string
	insertCkpt     string
	takeEvent      string
	extendLease    string
	park           string
	complete       string
	emit           string
	bufferEvent    string
	deliver        string
	notify         string
	listAttempts   string
	listSteps      string
}

// runColumns are the columns scanRun reads, in its order.
var runColumns = []string{
	"id", "workflow", "parent_id", "status", "input", "output", "error",
	"pause_requested", "ready_at", "wait_key", "wait_topic", "wait_kind", "wait_deadline",
	"owner", "lease_until", "token", "recoveries", "created_at", "updated_at",
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
// $N..$N+4 (key, number, started, ended, error).
func attemptsFrom(n int) string {
	p := func(i int) string { return "$" + strconv.Itoa(n+i) }
	return `unnest(` + p(0) + `::text[], ` + p(1) + `::int[], ` + p(2) + `::timestamptz[], ` + p(3) + `::timestamptz[], ` + p(4) +
		`::text[]) WITH ORDINALITY AS a(key, number, started, ended, error, ord)`
}

func buildQueries(schema string, notify bool) queries {
	r := strings.NewReplacer("{s}", schema, "{runs}", cols(""), "{r.runs}", cols("r"))
	var q queries

	// $2 ids, $3 workflows, $4 parent ids, $5 inputs, $6 channel. Rows go in
	// in ID order, so that concurrent creates of overlapping IDs wait for
	// each other instead of deadlocking.
	q.createRuns = `WITH ` + clockCTE + `,
ins AS (
	INSERT INTO {s}.runs (id, workflow, parent_id, status, input, ready_at, created_at, updated_at)
	SELECT t.id, t.workflow, t.parent_id, 'queued', t.input, clock.now, clock.now, clock.now
	FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[]) AS t(id, workflow, parent_id, input), clock
	ORDER BY t.id
	ON CONFLICT (id) DO NOTHING
	RETURNING id
)` + notifyCTE(notify, "ins", "true", 6) + `
SELECT ins.id FROM ins` + notifyJoin(notify)

	q.selectRuns = `SELECT {runs} FROM {s}.runs WHERE id = ANY($1::text[])`
	q.getRun = `SELECT {runs} FROM {s}.runs WHERE id = $1`

	// $2 workflows, $3 limit, $4 owner, $5 lease micros.
	//
	// Two bounded, locked scans (ready runs by ReadyAt, expired leases by
	// expiry) feed one update. The ready scan bounds ready_at by the clock in
	// its index condition, so runs sleeping into the future cost nothing. SKIP LOCKED makes concurrent claimers take
	// disjoint batches without waiting; a row updated since the snapshot is
	// rechecked against the conditions when it is locked.
	q.claim = `WITH ` + clockCTE + `,
ready AS (
	SELECT r.id, r.ready_at AS since FROM {s}.runs r
	WHERE r.status IN ('queued', 'waiting') AND r.ready_at <= coalesce($1::timestamptz, now())
		AND r.workflow = ANY($2::text[])
	ORDER BY r.ready_at
	LIMIT $3
	FOR UPDATE OF r SKIP LOCKED
),
expired AS (
	SELECT r.id, r.lease_until AS since FROM {s}.runs r, clock
	WHERE r.status = 'running' AND r.lease_until <= clock.now AND r.workflow = ANY($2::text[])
	ORDER BY r.lease_until
	LIMIT $3
	FOR UPDATE OF r SKIP LOCKED
),
picked AS (
	SELECT id, since FROM (SELECT id, since FROM ready UNION ALL SELECT id, since FROM expired) u
	ORDER BY since, id
	LIMIT $3
)
UPDATE {s}.runs r SET
	status = 'running',
	ready_at = NULL,
	owner = $4,
	lease_until = clock.now + $5::bigint * interval '1 microsecond',
	token = r.token + 1,
	recoveries = CASE WHEN r.status = 'running' THEN r.recoveries + 1 ELSE r.recoveries END,
	updated_at = clock.now
FROM picked, clock
WHERE r.id = picked.id
RETURNING r.id, r.token, r.workflow, r.parent_id, r.input, r.recoveries, r.suspend_state,
	r.wait_key, r.wait_topic, r.wait_kind, r.wait_deadline, r.lease_until, picked.since`

	// One row with NULL checkpoint columns when the run has none; no rows
	// when there is no such run.
	q.loadCheckpoint = `SELECT c.key, c.kind, c.output, c.error, c.seq, c.created_at
FROM {s}.runs r LEFT JOIN {s}.checkpoints c ON c.run_id = r.id
WHERE r.id = $1 ORDER BY c.seq`
	q.getCheckpoint = `SELECT key, kind, output, error, seq, created_at FROM {s}.checkpoints WHERE run_id = $1 AND key = $2`
	q.listAttempts = `SELECT seq, key, number, started, ended, error FROM {s}.attempts WHERE run_id = $1 ORDER BY seq`
	q.listSteps = `SELECT c.key, c.kind, c.output, c.error, c.seq, c.created_at, c.attempts
FROM {s}.runs r LEFT JOIN {s}.checkpoints c ON c.run_id = r.id
WHERE r.id = $1 ORDER BY c.seq`

	// Checkpoints of several runs at once (each run at most once), as
	// parallel arrays: $2 run, $3 token, $4 key, $5 kind, $6 output, $7
	// error (JSON text), $8 attempts (JSON text), $9 lease micros.
	//
	// One statement: lock the runs whose lease holds (f, in ID order),
	// insert each checkpoint with its attempts unless the key has one (ins),
	// and update the runs: extend the lease or, when a pause was requested
	// and the checkpoint was written, park the run paused with its lease
	// released. Every write reads f, so nothing is written for a request
	// whose fence fails, and such a request returns no row.
	q.checkpoint = `WITH ` + clockCTE + `,
req AS (
	SELECT * FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::bigint[])
		WITH ORDINALITY AS q(run_id, token, key, kind, output, error, attempts, lease, ord)
),
f AS (
	SELECT r.id, r.pause_requested, req.ord, req.key, req.lease
	FROM {s}.runs r JOIN req ON req.run_id = r.id AND req.token = r.token
	WHERE r.id = ANY($2::text[]) AND r.status = 'running'
	ORDER BY r.id
	FOR UPDATE OF r
),
ins AS (
	INSERT INTO {s}.checkpoints (run_id, key, kind, output, error, attempts, created_at)
	SELECT req.run_id, req.key, req.kind, req.output, req.error::jsonb, req.attempts::jsonb, clock.now
	FROM f JOIN req ON req.ord = f.ord, clock
	ON CONFLICT (run_id, key) DO NOTHING
	RETURNING run_id
),
w AS (
	SELECT f.id, f.ord, f.key, f.lease, ins.run_id IS NOT NULL AS written,
		f.pause_requested AND ins.run_id IS NOT NULL AS pause
	FROM f LEFT JOIN ins ON ins.run_id = f.id
)
UPDATE {s}.runs r SET
	status = CASE WHEN w.pause THEN 'paused' ELSE r.status END,
	pause_requested = CASE WHEN w.pause THEN false ELSE r.pause_requested END,
	ready_at = CASE WHEN w.pause THEN clock.now ELSE r.ready_at END,
	lease_until = CASE WHEN w.pause THEN clock.now ELSE clock.now + w.lease * interval '1 microsecond' END,
	recoveries = CASE WHEN w.written THEN 0 ELSE r.recoveries END,
	wait_key = CASE WHEN w.written AND r.wait_key = w.key THEN NULL ELSE r.wait_key END,
	wait_topic = CASE WHEN w.written AND r.wait_key = w.key THEN NULL ELSE r.wait_topic END,
	wait_kind = CASE WHEN w.written AND r.wait_key = w.key THEN NULL ELSE r.wait_kind END,
	wait_deadline = CASE WHEN w.written AND r.wait_key = w.key THEN NULL ELSE r.wait_deadline END,
	updated_at = clock.now
FROM w, clock
WHERE r.id = w.id
RETURNING w.ord, w.written, w.pause`

	// $2 run, $3 token, $4 lease micros, $5..$9 attempts.
	q.recordAttempts = `WITH ` + clockCTE + `,
f AS (
	UPDATE {s}.runs r SET lease_until = clock.now + $4::bigint * interval '1 microsecond', updated_at = clock.now
	FROM clock
	WHERE r.id = $2 AND r.status = 'running' AND r.token = $3
	RETURNING r.id
),
att AS (
	INSERT INTO {s}.attempts (run_id, key, number, started, ended, error)
	SELECT f.id, a.key, a.number, a.started, a.ended, a.error
	FROM f, ` + attemptsFrom(5) + `
	ORDER BY a.ord
)
SELECT count(*) FROM f`

	// $2 run, $3 token, $4 lease micros.
	q.heartbeat = `WITH ` + clockCTE + `
UPDATE {s}.runs r SET lease_until = clock.now + $4::bigint * interval '1 microsecond', updated_at = clock.now
FROM clock
WHERE r.id = $2 AND r.status = 'running' AND r.token = $3`

	// Transactions lock the run first, then read and write with fresh
	// snapshots that see every earlier holder's committed changes.
	q.lockRun = `SELECT {runs}, coalesce($1::timestamptz, now()) FROM {s}.runs WHERE id = $2 FOR UPDATE`

	// $2 run, $3 key, $4 kind, $5 output, $6 error.
	q.insertCkpt = `INSERT INTO {s}.checkpoints (run_id, key, kind, output, error, created_at)
VALUES ($2, $3, $4, $5, $6, coalesce($1::timestamptz, now()))
ON CONFLICT (run_id, key) DO NOTHING`

	// $1 run, $2 topic: consume the oldest buffered event.
	q.takeEvent = `DELETE FROM {s}.events WHERE (run_id, topic, seq) IN (
	SELECT run_id, topic, seq FROM {s}.events WHERE run_id = $1 AND topic = $2 ORDER BY seq LIMIT 1
) RETURNING payload`

	// $2 run, $3 token, $4 lease micros or NULL to keep the lease, $5
	// whether a checkpoint was written: a Suspend satisfied at once.
	q.extendLease = `UPDATE {s}.runs SET
	lease_until = CASE WHEN $4::bigint IS NULL THEN lease_until
		ELSE coalesce($1::timestamptz, now()) + $4::bigint * interval '1 microsecond' END,
	recoveries = CASE WHEN $5::boolean THEN 0 ELSE recoveries END,
	updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND status = 'running' AND token = $3`

	// $2 run, $3 token, $4 status, $5 ready_at, $6 wait key, $7 topic,
	// $8 kind, $9 deadline, $10 suspend state, $11 reset recoveries.
	q.park = `UPDATE {s}.runs SET status = $4, ready_at = $5, wait_key = $6, wait_topic = $7, wait_kind = $8, wait_deadline = $9,
	suspend_state = $10, pause_requested = false, lease_until = least(lease_until, coalesce($1::timestamptz, now())),
	recoveries = CASE WHEN $11::boolean THEN 0 ELSE recoveries END,
	updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND status = 'running' AND token = $3`

	// $2 run, $3 token, $4 status, $5 output, $6 error.
	q.complete = `UPDATE {s}.runs SET status = $4, output = $5, error = $6,
	ready_at = NULL, wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL,
	suspend_state = NULL, pause_requested = false, lease_until = least(lease_until, coalesce($1::timestamptz, now())),
	updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND status = 'running' AND token = $3`

	// $2 topic, $3 payload, $4 channel. Locks the waiting runs in ID order
	// (a run whose wait changed meanwhile is rechecked and skipped), writes
	// each wait's checkpoint unless the key has one, removes the wait and
	// wakes the run as the deliver statement does. A wait without a kind
	// writes an event checkpoint, as storage.Wait.DeliveryKind says.
	q.emit = `WITH ` + clockCTE + `,
w AS (
	SELECT id, wait_key, wait_kind FROM {s}.runs WHERE wait_topic = $2 ORDER BY id FOR UPDATE
),
ins AS (
	INSERT INTO {s}.checkpoints (run_id, key, kind, output, created_at)
	SELECT w.id, w.wait_key, coalesce(nullif(w.wait_kind, ''), 'event'), $3::bytea, clock.now FROM w, clock
	ON CONFLICT (run_id, key) DO NOTHING
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

	for _, p := range []*string{
		&q.createRuns, &q.selectRuns, &q.getRun, &q.claim, &q.loadCheckpoint, &q.getCheckpoint,
		&q.checkpoint, &q.recordAttempts, &q.heartbeat, &q.lockRun, &q.insertCkpt, &q.takeEvent,
		&q.extendLease, &q.park, &q.complete, &q.emit, &q.bufferEvent, &q.deliver, &q.listAttempts, &q.listSteps,
	} {
		*p = r.Replace(*p)
	}
	return q
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
	return `wait_key = NULL, wait_topic = NULL, wait_kind = NULL, wait_deadline = NULL,
		status = CASE WHEN r.status IN ('waiting', 'queued') THEN 'queued' ELSE r.status END,
		ready_at = CASE
			WHEN r.status = 'paused' THEN ` + now + `
			WHEN r.status IN ('waiting', 'queued') AND (r.ready_at IS NULL OR r.ready_at > ` + now + `) THEN ` + now + `
			ELSE r.ready_at END,
		recoveries = CASE WHEN ` + written + ` THEN 0 ELSE r.recoveries END,
		updated_at = ` + now
}
