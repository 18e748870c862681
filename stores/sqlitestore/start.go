package sqlitestore

import (
	"slices"
	"time"

	"github.com/stemflow/stem/storage"
)

// createRun makes one NewRun of CreateRuns in the writing transaction, at
// now, keeping the start rules of storage.NewRun, in order: its start key
// (join the key's holder), its ID (create, return the run there, refuse,
// or replace it), then its event, delivered to the run the create leaves.
// Everything is one change with the request's: a refusal writes nothing,
// and a failure rolls the whole request back.
//
// The common create costs what it did before the policies: the insert is
// tried first, and the run there is read only when the ID is taken.
func (w *wtx) createRun(r storage.NewRun, now time.Time) (storage.CreateResult, error) {
	n := now.UnixNano()
	if r.Key != nil {
		res, joined, err := w.joinKey(r, n)
		if err != nil || joined {
			return res, err
		}
	}
	var res storage.CreateResult
	ref, created, err := w.insertNew(r, now)
	if err != nil {
		return res, err
	}
	if !created {
		old, _, err := getRun(w.conn, r.ID)
		if err != nil {
			return res, err
		}
		res.Run = old
		switch refusal, replace := startPolicy(r, old.Status); {
		case refusal != "":
			res.Refused = refusal
			return res, nil
		case replace:
			if res.Refused, err = w.replace(r, old, n); err != nil || res.Refused != "" {
				return res, err
			}
			if ref, _, err = w.insertNew(r, now); err != nil {
				return res, err
			}
			created, res.Replaced, res.ReplacedStatus = true, true, old.Status
		}
	}
	res.Created = created
	if created && r.Key != nil {
		if _, err := w.exec(`INSERT INTO start_keys (workflow, key, run_ref) VALUES (?1, ?2, ?3)
			ON CONFLICT (workflow, key) DO UPDATE SET run_ref = excluded.run_ref`, r.Workflow, r.Key.Key, ref); err != nil {
			return res, err
		}
	}
	if r.Event != nil {
		ev := *r.Event
		ev.RunID = r.ID
		if res.Delivered, err = w.sendEvent(ev, n); err != nil {
			return res, err
		}
	}
	res.Run, _, err = getRun(w.conn, r.ID)
	return res, err
}

// startPolicy judges a create whose ID has a run in status: refused, with
// the refusal, or replace it; neither returns the run there.
func startPolicy(r storage.NewRun, status storage.RunStatus) (refusal storage.StartRefusal, replace bool) {
	if !status.Finished() {
		switch r.OnExisting {
		case storage.ExistingFail:
			return storage.RefusedExists, false
		case storage.ExistingReplace:
			return "", true
		}
		return "", false
	}
	switch r.OnEnded {
	case storage.EndedReject:
		return storage.RefusedEnded, false
	case storage.EndedReuse:
		return "", true
	case storage.EndedReuseFailed:
		if status == storage.StatusComplete {
			return storage.RefusedEnded, false
		}
		return "", true
	}
	if r.Event != nil {
		// An ended run cannot take the event, and no run is made for it.
		return storage.RefusedEnded, false
	}
	return "", false
}

// insertNew inserts r as a new run at now (queued, or running under its
// Lease), with its data and its first execution, unless its ID is taken;
// created reports which, ref is the new run's. A debounced run is ready
// when its window closes.
func (w *wtx) insertNew(r storage.NewRun, now time.Time) (ref int64, created bool, err error) {
	n := now.UnixNano()
	var inherited int64 // the token a deleted run of the ID left, if any
	scan := func(r row) { ref, inherited = r.int64(0), r.int64(1) }
	if l := r.Lease; l != nil {
		// An eager start: the run is inserted as claimUpdate leaves a run
		// it starts, its first token taken, its start stamped.
		created, err = w.queryRow(insertLeasedRun, scan, r.ID, r.Workflow, r.ParentID, string(r.ParentPolicy), n, nanosPtr(r.Deadline),
			r.QueueOf(), r.Partition, r.Priority, r.Version, l.Owner, leaseUntil(now, l.For))
	} else {
		ready := n
		switch {
		case r.Key != nil && r.Key.Debounce > 0:
			ready = now.Add(r.Key.Debounce).UnixNano()
		case r.StartAt != nil && r.StartAt.After(now):
			ready = r.StartAt.UnixNano()
		}
		created, err = w.queryRow(insertRun, scan, r.ID, r.Workflow, r.ParentID, string(r.ParentPolicy), n, ready, nanosPtr(r.Deadline),
			r.QueueOf(), r.Partition, r.Priority, r.Version)
	}
	if err != nil || !created {
		return 0, false, err
	}
	if inherited > 0 {
		if _, err := w.exec(`DELETE FROM run_tokens WHERE id = ?1`, r.ID); err != nil {
			return 0, false, err
		}
	}
	if _, err := w.exec(`INSERT INTO run_data (ref, input, headers) VALUES (?1, ?2, ?3)`, ref, bytesArg(r.Input), encodeHeaders(r.Headers)); err != nil {
		return 0, false, err
	}
	if _, err := w.exec(`INSERT INTO executions (run_ref, number, started_at) VALUES (?1, 1, ?2)`, ref, n); err != nil {
		return 0, false, err
	}
	if err := w.insertAttrs(ref, r.ID, n/1000, r.Attributes); err != nil { // runs.created_us
		return 0, false, err
	}
	if r.Lease != nil {
		if err := w.logEagerStart(r.QueueOf(), n); err != nil {
			return 0, false, err
		}
	} else {
		w.wake = true // a delayed run too: engines learn of its wake time
	}
	return ref, true, nil
}

// joinKey joins the holder of r's start key, at now, if it still holds
// it: a singleton's run that has not ended, a debounce window's run that
// is queued and not yet ready. Unless the key keeps the window's first
// input, a debounce holder takes r's input, headers and search
// attributes; r's event goes to the holder. joined is false, nothing written, when the key is free.
func (w *wtx) joinKey(r storage.NewRun, now int64) (res storage.CreateResult, joined bool, err error) {
	k := r.Key
	var ref, readyAt, createdUS int64
	var id string
	var status storage.RunStatus
	var ready bool
	found, err := w.queryRow(`SELECT r.ref, r.id, r.status, r.ready_at, r.created_us FROM start_keys k JOIN runs r ON r.ref = k.run_ref
		WHERE k.workflow = ?1 AND k.key = ?2`, func(row row) {
		ref, id, status = row.int64(0), row.str(1), storage.RunStatus(row.str(2))
		ready, readyAt = !row.isNull(3), row.int64(3)
		createdUS = row.int64(4)
	}, r.Workflow, k.Key)
	if err != nil || !found {
		return res, false, err
	}
	if k.Debounce == 0 {
		if status.Finished() {
			return res, false, nil
		}
	} else {
		if status != storage.StatusQueued || !ready || readyAt <= now {
			return res, false, nil
		}
		if !k.KeepFirst {
			if _, err := w.exec(`UPDATE run_data SET input = ?2, headers = ?3 WHERE ref = ?1`,
				ref, bytesArg(r.Input), encodeHeaders(r.Headers)); err != nil {
				return res, false, err
			}
			if _, err := w.exec(`UPDATE runs SET updated_at = ?2 WHERE ref = ?1`, ref, now); err != nil {
				return res, false, err
			}
			if err := w.replaceAttrs(ref, id, createdUS, r.Attributes); err != nil {
				return res, false, err
			}
		}
	}
	res.Joined = true
	if r.Event != nil {
		ev := *r.Event
		ev.RunID = id
		if res.Delivered, err = w.sendEvent(ev, now); err != nil {
			return res, false, err
		}
	}
	res.Run, _, err = getRun(w.conn, id)
	return res, true, err
}

// replace ends the run old on r's terms (storage.ReplaceTerms) and deletes
// it with its family, at now, so that r can be created under its ID; or,
// writing nothing, refuses (RefusedFamily) when an unfinished descendant
// does not end with it.
//
// An unfinished old run is terminated as Terminate does; an ended one's
// unfinished descendants that end with their parent are terminated as
// Terminate terminates them. A descendant left unfinished after that (one
// below a finished child that abandoned its parent) is terminated with
// the child error too, so that every run deleted unfinished has its end
// announced. Then the run and every descendant, finished ones too, are
// deleted as Purge deletes a run, the lease token of each that was ever
// claimed kept in run_tokens, so that the next run made under its ID goes
// on from it: fencing compares a run's ID and token, and a holder of a
// deleted run's lease, which may not have heard yet that it lost it, must
// not match the lease of the run made in its place (the new run, or a
// child of it that takes a deleted child's ID).
func (w *wtx) replace(r storage.NewRun, old storage.RunRecord, now int64) (storage.StartRefusal, error) {
	type member struct {
		ref      int64
		id       string
		finished bool
	}
	var family []member
	var refused bool
	if err := w.query(familyQuery, func(row row) error {
		status, root := storage.RunStatus(row.str(2)), row.int64(4) == 1
		m := member{ref: row.int64(0), id: row.str(1), finished: status.Finished()}
		if !root && !m.finished && storage.ParentPolicy(row.str(3)) != storage.ParentTerminate {
			refused = true
		}
		family = append(family, m)
		return nil
	}, old.ID); err != nil {
		return "", err
	}
	if refused {
		return storage.RefusedFamily, nil
	}
	terms := r.Replace
	childError := terms.ChildError
	var ended []string
	var err error
	if !old.Status.Finished() {
		ended, err = w.terminate(storage.TerminateRequest{RunID: old.ID, Error: terms.Error, ChildError: &childError, ChildCancel: terms.ChildCancel}, now)
	} else {
		ended, err = w.terminateChildren(old.ID, &childError, terms.ChildCancel, now)
	}
	if err != nil {
		return "", err
	}
	refs := make([]int64, 0, len(family))
	for _, m := range family {
		refs = append(refs, m.ref)
		if !m.finished && m.id != old.ID && !slices.Contains(ended, m.id) {
			if err := w.finish(m.id, storage.StatusTerminated, nil, &childError, nil, false, now); err != nil {
				return "", err
			}
		}
	}
	// The tokens go on where the deleted runs left them (see insertRun),
	// read before the rows go.
	list := refList(refs)
	if _, err := w.exec(`INSERT INTO run_tokens (id, token)
			SELECT id, token FROM runs WHERE ref IN (SELECT value FROM json_each(?1)) AND token > 0
		ON CONFLICT (id) DO UPDATE SET token = max(token, excluded.token)`, list); err != nil {
		return "", err
	}
	_, _, err = w.deleteRuns(list)
	return "", err
}

// familyQuery selects run ?1 and every descendant of it (children, their
// children, ..., through finished and abandoning ones alike): ref, ID,
// status, parent policy, and 1 for ?1 itself, 0 for a descendant. Each
// run has one parent, so the walk meets a run once; UNION ends it should
// the parents loop.
const familyQuery = `WITH RECURSIVE family (ref, id, status, parent_policy, root) AS (
		SELECT ref, id, status, parent_policy, 1 FROM runs WHERE id = ?1
		UNION
		SELECT r.ref, r.id, r.status, r.parent_policy, 0 FROM family f JOIN runs r ON r.parent_id = f.id
			WHERE r.id != ?1
	)
	SELECT ref, id, status, parent_policy, root FROM family`
