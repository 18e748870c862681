package sqlitestore

import (
	"context"
	"fmt"

	"github.com/stemflow/stem/storage"
)

// Updates and streams (storage.Interactor), in the tables updates, streams
// and stream_values (see migrations/013_updates_streams.up.sql).
//
// SendUpdate is one write request of the writer: it reads the run and any
// update of the ID in one statement, records a new update and delivers it
// with SendEvent's own code (deliverOrBuffer). A reply and stream writes
// ride with a checkpoint (w.interact, called by w.checkpoint, so that
// CheckpointTx writes them too) only when the checkpoint is written, and
// cost a plain checkpoint nothing: no statement runs unless the request
// carries them. Their announcements join the runs the write ended
// (wtx.finished), told to the Hub after the commit, and dropped with them
// when the request is rolled back. The reads are single statements on a
// read connection, each reading one state of the database.

// SendUpdate records an update for a run and delivers it, in one write;
// see storage.Interactor.
func (s *Store) SendUpdate(ctx context.Context, req storage.UpdateRequest) (storage.UpdateResult, error) {
	if err := req.Validate(); err != nil {
		return storage.UpdateResult{}, fmt.Errorf("sqlitestore: %w", err)
	}
	var res storage.UpdateResult
	err := s.write(ctx, "send update", func(w *wtx) (err error) {
		res, err = w.sendUpdate(req, s.now().UnixNano())
		return err
	})
	if err != nil {
		return storage.UpdateResult{}, err
	}
	return res, nil
}

// sendUpdate is SendUpdate in the writing transaction, at now.
func (w *wtx) sendUpdate(req storage.UpdateRequest, now int64) (storage.UpdateResult, error) {
	var (
		res     storage.UpdateResult
		wt      waiter
		has     bool
		scanErr error
	)
	found, err := w.queryRow(sendUpdateQuery, func(r row) {
		if wt, scanErr = scanWaiter(r); scanErr != nil {
			return
		}
		if has = !r.isNull(9); has {
			res.Update, scanErr = scanUpdate(r[10:])
		}
	}, req.RunID, req.ID)
	if err == nil {
		err = scanErr
	}
	switch {
	case err != nil:
		return res, err
	case !found:
		return res, storage.ErrRunNotFound
	case has:
		res.Update.RunID = req.RunID
		return res, nil
	case wt.status.Finished():
		return res, fmt.Errorf("%w: send an update to a %s run", storage.ErrInvalidState, wt.status)
	}
	headers := encodeHeaders(req.Headers)
	var seq int64
	if _, err := w.queryRow(insertUpdate, func(r row) { seq = r.int64(0) },
		wt.ref, req.ID, req.Name, bytesArg(req.Payload), headers, now); err != nil {
		return res, err
	}
	res.Created = true
	res.Update = storage.UpdateRecord{
		RunID:     req.RunID,
		ID:        req.ID,
		Name:      req.Name,
		Payload:   req.Payload,
		Seq:       seq,
		State:     storage.UpdatePending,
		CreatedAt: fromNanos(now),
	}
	if headers != nil {
		res.Update.Headers = req.Headers
	}
	res.Delivered, err = w.deliverOrBuffer(wt, storage.UpdateTopic(req.Name), req.Payload, now)
	return res, err
}

// rebuffer buffers again for run ref, restarted into execution exec
// (whose copied checkpoints are written), the updates that are pending
// and whose payload is not the output of an update delivery of exec, in
// seq order, after dropping the run's buffered updates: an update the old
// execution took without replying would otherwise never reach the new
// one. Two statements, both on the run's rows through their indexes; a
// Restart calls it only for a run that has updates.
func (w *wtx) rebuffer(ref, exec, now int64) error {
	if _, err := w.exec(unbufferUpdates, ref, storage.UpdateTopicPrefix, updateTopicEnd); err != nil {
		return err
	}
	_, err := w.exec(rebufferUpdates, ref, exec, storage.UpdateTopicPrefix, now)
	return err
}

// unbufferUpdates deletes the events of run ref ?1 on topics from ?2 to
// ?3 (excluded): one range of events_run_topic.
const unbufferUpdates = `DELETE FROM events WHERE run_ref = ?1 AND topic >= ?2 AND topic < ?3`

// rebufferUpdates buffers, as events on their topic (?3, the prefix,
// followed by the name) created at ?4, the pending updates of run ref ?1
// in seq order (updates_seq), each unless an update checkpoint of
// execution ?2 has its payload as output (nil and empty alike).
const rebufferUpdates = `INSERT INTO events (run_ref, topic, payload, created_at)
	SELECT u.run_ref, ?3 || u.name, u.payload, ?4 FROM updates u
	WHERE u.run_ref = ?1 AND u.state = 'pending' AND NOT EXISTS (
		SELECT 1 FROM checkpoints c WHERE c.run_ref = ?1 AND c.execution = ?2 AND c.kind = 'update'
			AND coalesce(c.output, x'') = coalesce(u.payload, x''))
	ORDER BY u.seq`

// updateTopicEnd is the least topic above every one that starts with
// storage.UpdateTopicPrefix, so that they are one range of an index.
var updateTopicEnd = storage.UpdateTopicPrefix[:len(storage.UpdateTopicPrefix)-1] +
	string(storage.UpdateTopicPrefix[len(storage.UpdateTopicPrefix)-1]+1)

// sendUpdateQuery selects run ?1, with the columns scanWaiter reads, and
// its update of ID ?2: its seq (NULL when there is none) and updateColsU.
const sendUpdateQuery = `SELECT r.id, r.status, r.ref, r.execution, ` + waitCols + `, u.seq, ` + updateColsU + `
	FROM runs r LEFT JOIN updates u ON u.run_ref = r.ref AND u.id = ?2
	WHERE r.id = ?1`

// insertUpdate records update ?2 of the run ref ?1, pending, with the
// run's next seq (one more than its highest, by updates_seq), which it
// returns.
const insertUpdate = `INSERT INTO updates (run_ref, id, seq, name, payload, headers, state, created_at)
	VALUES (?1, ?2, (SELECT coalesce(max(seq), 0) + 1 FROM updates WHERE run_ref = ?1), ?3, ?4, ?5, 'pending', ?6)
	RETURNING seq`

// updateColsU are the columns scanUpdate reads, of updates u.
const updateColsU = `u.id, u.name, u.payload, u.headers, u.seq, u.state, u.reply, u.error_message, u.error_code, u.created_at, u.replied_at`

// scanUpdate reads updateColsU; the record's RunID is the caller's to set.
func scanUpdate(r row) (storage.UpdateRecord, error) {
	u := storage.UpdateRecord{
		ID:        r.str(0),
		Name:      r.str(1),
		Payload:   r.bytes(2),
		Seq:       r.int64(4),
		State:     storage.UpdateState(r.str(5)),
		Reply:     r.bytes(6),
		Error:     r.errorInfo(7),
		CreatedAt: r.time(9),
		RepliedAt: r.timePtr(10),
	}
	var err error
	if u.Headers, err = decodeHeaders(r, 3); err != nil {
		err = fmt.Errorf("update %q: %w", u.ID, err)
	}
	return u, err
}

// interact writes a written checkpoint's reply and stream writes for the
// fenced run ref (ID runID), at now, and notes their announcements. An
// update the run does not have is storage.ErrInvalidArgument, which rolls
// the whole request back, checkpoint included; a checkpoint that is not
// written checks its reply with checkReply alone.
func (w *wtx) interact(ref int64, runID string, reply *storage.UpdateReply, streams []storage.StreamWrite, now int64) error {
	if reply != nil {
		if err := w.reply(ref, runID, reply, now); err != nil {
			return err
		}
	}
	for i, sw := range streams {
		var length int64
		if _, err := w.queryRow(writeStream, func(r row) { length = r.int64(0) },
			ref, sw.Stream, len(sw.Values), sw.Close, now); err != nil {
			return err
		}
		at := length - int64(len(sw.Values))
		for j, v := range sw.Values {
			if _, err := w.exec(insertStreamValue, ref, sw.Stream, at+int64(j), bytesArg(v), now); err != nil {
				return err
			}
		}
		if !writesStream(streams[:i], sw.Stream) {
			w.finished = append(w.finished, storage.StreamAnnouncement(runID, sw.Stream))
		}
	}
	return nil
}

// writeStream adds ?3 values to the length of stream ?2 of the run ref
// ?1, creating its row, closes it or opens it (?4) and stamps it at ?5;
// it returns the length after the values.
const writeStream = `INSERT INTO streams (run_ref, name, length, closed, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
	ON CONFLICT (run_ref, name) DO UPDATE SET length = length + excluded.length, closed = excluded.closed,
		updated_at = excluded.updated_at
	RETURNING length`

// insertStreamValue appends value ?4 at position ?3 of stream ?2 of the
// run ref ?1, written at ?5.
const insertStreamValue = `INSERT INTO stream_values (run_ref, stream, position, value, written_at) VALUES (?1, ?2, ?3, ?4, ?5)`

// writesStream reports whether one of streams writes the stream named.
func writesStream(streams []storage.StreamWrite, name string) bool {
	for _, sw := range streams {
		if sw.Stream == name {
			return true
		}
	}
	return false
}

// reply writes the reply to the update of the run ref (ID runID), at now,
// unless the update was replied to already (the first reply stands); an
// update the run does not have is storage.ErrInvalidArgument.
func (w *wtx) reply(ref int64, runID string, reply *storage.UpdateReply, now int64) error {
	n, err := w.exec(replyUpdate, ref, reply.ID, bytesArg(reply.Output), errMsg(reply.Error), errCode(reply.Error), now)
	if err != nil {
		return err
	}
	if n == 1 {
		w.finished = append(w.finished, storage.UpdateAnnouncement(runID, reply.ID))
		return nil
	}
	return w.checkReply(ref, runID, reply)
}

// checkReply refuses, with storage.ErrInvalidArgument, a reply to an
// update the run ref (ID runID) does not have.
func (w *wtx) checkReply(ref int64, runID string, reply *storage.UpdateReply) error {
	found, err := w.queryRow(hasUpdate, func(row) {}, ref, reply.ID)
	if err == nil && !found {
		err = fmt.Errorf("%w: reply to update %q, which run %q does not have", storage.ErrInvalidArgument, reply.ID, runID)
	}
	return err
}

// replyUpdate writes reply ?3 (error ?4 and ?5) to update ?2 of the run
// ref ?1 at ?6, if it is pending.
const replyUpdate = `UPDATE updates SET state = 'replied', reply = ?3, error_message = ?4, error_code = ?5, replied_at = ?6
	WHERE run_ref = ?1 AND id = ?2 AND state = 'pending'`

// hasUpdate selects a row when the run ref ?1 has an update of ID ?2.
const hasUpdate = `SELECT 1 FROM updates WHERE run_ref = ?1 AND id = ?2`

// GetUpdate returns a run's update, or storage.ErrUpdateNotFound (also
// when the run is unknown); see storage.Interactor.
func (s *Store) GetUpdate(ctx context.Context, runID, id string) (storage.UpdateRecord, error) {
	const op = "get update"
	if err := storage.ValidateRunRef(op, runID); err != nil {
		return storage.UpdateRecord{}, err
	}
	if err := storage.CheckUpdateID(id); err != nil {
		return storage.UpdateRecord{}, fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	var u storage.UpdateRecord
	err := s.read(ctx, op, false, func(c *conn) error {
		var scanErr error
		found, err := c.queryRow(getUpdateQuery, func(r row) { u, scanErr = scanUpdate(r) }, runID, id)
		switch {
		case err != nil:
			return err
		case !found:
			return storage.ErrUpdateNotFound
		}
		return scanErr
	})
	if err != nil {
		return storage.UpdateRecord{}, err
	}
	u.RunID = runID
	return u, nil
}

// getUpdateQuery selects updateColsU of update ?2 of run ?1.
const getUpdateQuery = `SELECT ` + updateColsU + ` FROM runs r JOIN updates u ON u.run_ref = r.ref
	WHERE r.id = ?1 AND u.id = ?2`

// ListUpdates returns a run's updates in Seq order, after q.After, by the
// index updates_seq; see storage.Interactor.
func (s *Store) ListUpdates(ctx context.Context, q storage.UpdatesQuery) ([]storage.UpdateRecord, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	var list []storage.UpdateRecord
	err := s.read(ctx, "list updates", false, func(c *conn) error {
		list = list[:0]
		return c.query(listUpdatesQuery, func(r row) error {
			u, err := scanUpdate(r)
			u.RunID = q.RunID
			list = append(list, u)
			return err
		}, q.RunID, q.After, q.PageSize())
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}

// listUpdatesQuery selects updateColsU of the updates of run ?1 whose seq
// is above ?2, in seq order, at most ?3: one range of updates_seq.
const listUpdatesQuery = `SELECT ` + updateColsU + ` FROM runs r JOIN updates u ON u.run_ref = r.ref
	WHERE r.id = ?1 AND u.seq > ?2 ORDER BY u.seq LIMIT ?3`

// ReadStream reads a stream's values from q.From on, its length, whether
// it is closed and the run's status in one statement: one state of the
// database. The values are one range of stream_values' primary key; see
// storage.Interactor.
func (s *Store) ReadStream(ctx context.Context, q storage.StreamQuery) (storage.StreamPage, error) {
	if err := q.Validate(); err != nil {
		return storage.StreamPage{}, fmt.Errorf("sqlitestore: %w", err)
	}
	var page storage.StreamPage
	err := s.read(ctx, "read stream", false, func(c *conn) error {
		page = storage.StreamPage{Next: q.From}
		found := false
		err := c.query(readStreamQuery, func(r row) error {
			found = true
			page.RunStatus = storage.RunStatus(r.str(0))
			page.Length, page.Closed = r.int64(1), r.int64(2) != 0
			if r.isNull(3) {
				return nil // no value from q.From on
			}
			v := storage.StreamValue{Offset: r.int64(3), Value: r.bytes(4), WrittenAt: r.time(5)}
			page.Values = append(page.Values, v)
			page.Next = v.Offset + 1
			return nil
		}, q.RunID, q.Stream, q.From, q.PageSize())
		if err == nil && !found {
			err = storage.ErrRunNotFound
		}
		return err
	})
	if err != nil {
		return storage.StreamPage{}, err
	}
	return page, nil
}

// readStreamQuery selects, for run ?1 and its stream ?2, the run's status,
// the stream's length and closed flag (0 and 0 when it was never written)
// and the values at positions ?3 to ?3+?4-1 in order: position, value and
// written_at, NULL in a single row when there are none. Positions are
// dense, so that range holds at most ?4 values.
const readStreamQuery = `SELECT r.status, coalesce(s.length, 0), coalesce(s.closed, 0), v.position, v.value, v.written_at
	FROM runs r
	LEFT JOIN streams s ON s.run_ref = r.ref AND s.name = ?2
	LEFT JOIN stream_values v ON v.run_ref = r.ref AND v.stream = ?2 AND v.position >= ?3 AND v.position < ?3 + ?4
	WHERE r.id = ?1
	ORDER BY v.position`

// ListStreams returns a run's streams by name; see storage.Interactor.
func (s *Store) ListStreams(ctx context.Context, runID string) ([]storage.StreamInfo, error) {
	const op = "list streams"
	if err := storage.ValidateRunRef(op, runID); err != nil {
		return nil, err
	}
	var list []storage.StreamInfo
	err := s.read(ctx, op, false, func(c *conn) error {
		list = list[:0]
		found := false
		err := c.query(listStreamsQuery, func(r row) error {
			found = true
			if !r.isNull(0) {
				list = append(list, storage.StreamInfo{Name: r.str(0), Length: r.int64(1), Closed: r.int64(2) != 0, UpdatedAt: r.time(3)})
			}
			return nil
		}, runID)
		if err == nil && !found {
			err = storage.ErrRunNotFound
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}

// listStreamsQuery selects the streams of run ?1 by name: name, length,
// closed and updated_at, NULL in a single row when it has none.
const listStreamsQuery = `SELECT s.name, s.length, s.closed, s.updated_at
	FROM runs r LEFT JOIN streams s ON s.run_ref = r.ref
	WHERE r.id = ?1 ORDER BY s.name`
