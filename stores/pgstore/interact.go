package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/storage"
)

var _ storage.Interactor = (*Store)(nil)

// Updates and streams (storage.Interactor). An update is a row of the
// updates table, recorded under its run's row lock by SendUpdate's
// transaction, which delivers it as SendEvent delivers an event (send).
// A checkpoint's reply and stream writes (interaction) go with the
// checkpoint: in the writers' batch, by one more statement after the
// checkpoint statement in its transaction and round trip, which writes
// them for the checkpoints that statement wrote (see the interact query);
// in a transaction of the checkpoint's own (checkpointIn), by the same
// statement after the checkpoint was written. A checkpoint without them
// sends nothing more. Replies and stream writes are announced on the
// ended channel by that statement, so in the transaction that writes them.

// interaction is what a checkpoint writes to its run's updates and
// streams, nil for a checkpoint that carries neither.
type interaction struct {
	reply    *storage.UpdateReply
	replyErr *string // JSON text of reply.Error
	// streams are the request's stream writes merged per stream, in the
	// order of each stream's first write.
	streams []streamWrites
	// values are every value appended, in order; valueOf[i] is the index
	// in streams of values[i]'s stream, valueAt[i] its index among the
	// values appended to that stream.
	values  [][]byte
	valueOf []int
	valueAt []int64
}

// streamWrites are a checkpoint's writes to one stream: how many values
// they append and whether the stream is closed after them (the last
// write closes it, or appends and so opens it again).
type streamWrites struct {
	name   string
	n      int64
	closed bool
}

// interactionOf returns what req writes to its run's updates and streams,
// nil for none.
func interactionOf(req *storage.CheckpointRequest) (*interaction, error) {
	if req.Reply == nil && len(req.Streams) == 0 {
		return nil, nil
	}
	in := &interaction{reply: req.Reply}
	if req.Reply != nil {
		errJSON, err := encodeError(req.Reply.Error)
		if err != nil {
			return nil, err
		}
		in.replyErr = textOf(errJSON)
	}
	index := make(map[string]int, len(req.Streams))
	for _, w := range req.Streams {
		i, ok := index[w.Stream]
		if !ok {
			i = len(in.streams)
			index[w.Stream] = i
			in.streams = append(in.streams, streamWrites{name: w.Stream})
		}
		st := &in.streams[i]
		for _, v := range w.Values {
			in.values, in.valueOf, in.valueAt = append(in.values, v), append(in.valueOf, i), append(in.valueAt, st.n)
			st.n++
		}
		// Validation leaves two kinds of write: values, after which the
		// stream is open, and a close, with or without values before it.
		st.closed = w.Close
	}
	return in, nil
}

// interactArgs are the interact statement's arguments for calls, each
// carrying an interaction; known says the caller knows each call's
// checkpoint was written. The first, the clock, is set per attempt.
func (s *Store) interactArgs(calls []*ckptCall, known bool) []any {
	var (
		repRuns, repKeys, repIDs, repSaid []string
		repOutputs                        [][]byte
		repErrs                           []*string
		stRuns, stKeys, stNames, stSaid   []string
		stCounts                          []int64
		stClosed                          []bool
		valOf, valAt                      []int64
		values                            [][]byte
	)
	for _, c := range calls {
		in, run, key := c.inter, c.req.Lease.RunID, c.req.Checkpoint.Key
		if r := in.reply; r != nil {
			repRuns, repKeys, repIDs = append(repRuns, run), append(repKeys, key), append(repIDs, r.ID)
			repOutputs, repErrs = append(repOutputs, r.Output), append(repErrs, in.replyErr)
			repSaid = append(repSaid, storage.UpdateAnnouncement(run, r.ID))
		}
		base := int64(len(stRuns)) + 1 // the ordinal of in.streams[0]
		for _, st := range in.streams {
			stRuns, stKeys, stNames = append(stRuns, run), append(stKeys, key), append(stNames, st.name)
			stCounts, stClosed = append(stCounts, st.n), append(stClosed, st.closed)
			stSaid = append(stSaid, storage.StreamAnnouncement(run, st.name))
		}
		for i, v := range in.values {
			valOf, valAt, values = append(valOf, base+int64(in.valueOf[i])), append(valAt, in.valueAt[i]), append(values, v)
		}
	}
	args := []any{nil, known, repRuns, repKeys, repIDs, repOutputs, repErrs, repSaid,
		stRuns, stKeys, stNames, stCounts, stClosed, stSaid, valOf, valAt, values}
	if s.notify {
		args = append(args, s.endedChannel)
	}
	return args
}

// interactIn writes call's interaction in tx at now (a time, or the store
// clock's argument), after its checkpoint was written in tx.
func (s *Store) interactIn(ctx context.Context, tx pgx.Tx, call *ckptCall, now any) error {
	args := s.interactArgs([]*ckptCall{call}, true)
	args[0] = now
	_, err := tx.Exec(ctx, s.q.interact, args...)
	return err
}

// rowQuerier is what checkReply reads through: the store's pool or a
// transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// checkReply refuses a checkpoint whose reply names an update its run
// does not have, before anything is written: storage.ErrInvalidArgument.
// A run's updates are deleted only with the run, so one found here is
// there when the checkpoint is written. A request whose lease does not
// hold passes, so that the write reports the lost lease, as it does
// whatever else the request carries.
func (s *Store) checkReply(ctx context.Context, q rowQuerier, req *storage.CheckpointRequest) error {
	if req.Reply == nil {
		return nil
	}
	var holds, found bool
	err := q.QueryRow(ctx, s.q.replyCheck, req.Lease.RunID, req.Lease.Token, req.Reply.ID).Scan(&holds, &found)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	case holds && !found:
		return fmt.Errorf("run %q: %w: reply to update %q: the run has no update of the ID",
			req.Lease.RunID, storage.ErrInvalidArgument, req.Reply.ID)
	}
	return nil
}

// SendUpdate records an update for a run and delivers it as SendEvent
// delivers an event on the update's topic, in one transaction: the run
// locked, the update recorded (or the one of its ID found), and the
// delivery; see storage.Interactor.
func (s *Store) SendUpdate(ctx context.Context, req storage.UpdateRequest) (storage.UpdateResult, error) {
	const op = "send update"
	if err := s.check(op); err != nil {
		return storage.UpdateResult{}, err
	}
	if err := req.Validate(); err != nil {
		return storage.UpdateResult{}, fmt.Errorf("pgstore: %w", err)
	}
	var (
		res   storage.UpdateResult
		ready bool
	)
	headers := encodeHeaders(req.Headers)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res, ready = storage.UpdateResult{}, false
		r, err := s.lockExisting(ctx, tx, req.RunID)
		if err != nil {
			return err
		}
		row := tx.QueryRow(ctx, s.q.sendUpdate, r.now, req.RunID, req.ID, req.Name, req.Payload, headers, !r.Status.Finished())
		var created bool
		res.Update, err = scanUpdate(row, &created)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("run %q is %s: %w", req.RunID, r.Status, storage.ErrInvalidState)
		}
		if err != nil || !created {
			return err
		}
		res.Created = true
		ev := storage.Event{RunID: req.RunID, Topic: storage.UpdateTopic(req.Name), Payload: req.Payload}
		res.Delivered, ready, err = s.send(ctx, tx, r, ev)
		return err
	})
	if err != nil {
		return storage.UpdateResult{}, s.wrap(op, err)
	}
	if ready {
		s.poke()
	}
	return res, nil
}

// GetUpdate returns a run's update, or storage.ErrUpdateNotFound (also
// for an unknown run).
func (s *Store) GetUpdate(ctx context.Context, runID, id string) (storage.UpdateRecord, error) {
	const op = "get update"
	if err := s.check(op); err != nil {
		return storage.UpdateRecord{}, err
	}
	if err := storage.ValidateRunRef(op, runID); err != nil {
		return storage.UpdateRecord{}, err
	}
	if err := storage.CheckUpdateID(id); err != nil {
		return storage.UpdateRecord{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	u, err := scanUpdate(s.pool.QueryRow(ctx, s.q.getUpdate, runID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.UpdateRecord{}, fmt.Errorf("pgstore: %s %q of run %q: %w", op, id, runID, storage.ErrUpdateNotFound)
	}
	if err != nil {
		return storage.UpdateRecord{}, s.wrap(op, err)
	}
	return u, nil
}

// ListUpdates returns a page of a run's updates in Seq order, through
// updates_seq_idx; an unknown run has none.
func (s *Store) ListUpdates(ctx context.Context, q storage.UpdatesQuery) ([]storage.UpdateRecord, error) {
	const op = "list updates"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.q.listUpdates, q.RunID, q.After, q.PageSize())
	if err != nil {
		return nil, s.wrap(op, err)
	}
	var out []storage.UpdateRecord
	err = forRows(rows, func() error {
		u, err := scanUpdate(rows)
		out = append(out, u)
		return err
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}

// ReadStream returns a page of a run's stream with the stream's length,
// whether it is closed and the run's status, read by one statement (one
// snapshot): a range of stream_values_pkey, and a probe each of the
// run's and the stream's rows.
func (s *Store) ReadStream(ctx context.Context, q storage.StreamQuery) (storage.StreamPage, error) {
	const op = "read stream"
	if err := s.check(op); err != nil {
		return storage.StreamPage{}, err
	}
	if err := q.Validate(); err != nil {
		return storage.StreamPage{}, fmt.Errorf("pgstore: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.q.readStream, q.RunID, q.Stream, q.From, q.PageSize())
	if err != nil {
		return storage.StreamPage{}, s.wrap(op, err)
	}
	page := storage.StreamPage{Next: q.From}
	found := false
	err = forRows(rows, func() error {
		found = true
		var (
			status  string
			length  *int64
			closed  *bool
			offset  *int64
			value   []byte
			written *time.Time
		)
		if err := rows.Scan(&status, &length, &closed, &offset, &value, &written); err != nil {
			return err
		}
		page.RunStatus = storage.RunStatus(status)
		if length != nil {
			page.Length, page.Closed = *length, *closed
		}
		if offset != nil {
			page.Values = append(page.Values, storage.StreamValue{Offset: *offset, Value: value, WrittenAt: *written})
		}
		return nil
	})
	if err != nil {
		return storage.StreamPage{}, s.wrap(op, err)
	}
	if !found {
		return storage.StreamPage{}, fmt.Errorf("pgstore: %s of run %q: %w", op, q.RunID, storage.ErrRunNotFound)
	}
	// In offset order already, the range read in the key's order; sorted
	// all the same, at no cost, should a plan ever read it otherwise.
	slices.SortFunc(page.Values, func(a, b storage.StreamValue) int { return cmp.Compare(a.Offset, b.Offset) })
	if n := len(page.Values); n > 0 {
		page.Next = page.Values[n-1].Offset + 1
	}
	return page, nil
}

// ListStreams returns a run's streams, by name, read by one statement.
func (s *Store) ListStreams(ctx context.Context, runID string) ([]storage.StreamInfo, error) {
	const op = "list streams"
	if err := s.check(op); err != nil {
		return nil, err
	}
	if err := storage.ValidateRunRef(op, runID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.listStreams, runID)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	found := false
	out := []storage.StreamInfo{}
	err = forRows(rows, func() error {
		found = true
		var (
			name    *string
			length  *int64
			closed  *bool
			updated *time.Time
		)
		if err := rows.Scan(&name, &length, &closed, &updated); err != nil || name == nil {
			return err
		}
		out = append(out, storage.StreamInfo{Name: *name, Length: *length, Closed: *closed, UpdatedAt: *updated})
		return nil
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if !found {
		return nil, fmt.Errorf("pgstore: %s of run %q: %w", op, runID, storage.ErrRunNotFound)
	}
	return out, nil
}

// scanUpdate reads the updateColumns, after dest.
func scanUpdate(row scanner, dest ...any) (storage.UpdateRecord, error) {
	var (
		u       storage.UpdateRecord
		headers *string
		state   string
		errJSON []byte
	)
	err := row.Scan(append(dest, &u.RunID, &u.ID, &u.Name, &u.Payload, &headers, &u.Seq, &state, &u.Reply, &errJSON,
		&u.CreatedAt, &u.RepliedAt)...)
	if err != nil {
		return storage.UpdateRecord{}, err
	}
	u.State = storage.UpdateState(state)
	if u.Headers, err = decodeHeaders(headers); err != nil {
		return storage.UpdateRecord{}, err
	}
	if u.Error, err = decodeError(errJSON); err != nil {
		return storage.UpdateRecord{}, err
	}
	return u, nil
}
