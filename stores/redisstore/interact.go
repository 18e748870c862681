package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/storage"
)

// Updates and streams. An update is a field of the run's updates hash
// (up:<id>), its ID in the run's update order (ul:<id>, whose length is
// the last Seq), and once replied to a field of the run's replies hash
// (ur:<id>): the reply is written once, with HSETNX, so the first stands.
// A stream is a list of values (sv:<id>:<stream>, the offset the index)
// and a field of the run's stream metadata (sm:<id>), which Purge and a
// replacement read to delete the lists (drop_run in
// scripts/lib/family.lua). All are the run's, not an execution's, so a
// continue-as-new or a restart keeps them.
//
// SendUpdate is one script (update.lua) that records the update and sends
// it with SendEvent's own code (send in scripts/lib/events.lua). A
// checkpoint with a reply or stream writes runs interact.lua, the
// checkpoint's write with them (and the completion, when the request has
// one), so a plain checkpoint's script and arguments stay as they were.
var (
	updateScript   = newScript("update")
	updatesScript  = newScript("updates")
	streamScript   = newScript("stream")
	streamsScript  = newScript("streams")
	interactScript = newScript("interact")
)

func init() {
	allScripts = append(allScripts, updateScript, updatesScript, streamScript, streamsScript, interactScript)
}

// SendUpdate implements storage.Interactor. Like SendEvent, the call
// carries an operation ID, so a repeated call returns the first reply
// (Created and Delivered as they were) instead of reporting the update it
// had just recorded as an existing one.
func (s *Store) SendUpdate(ctx context.Context, req storage.UpdateRequest) (storage.UpdateResult, error) {
	var res storage.UpdateResult
	if err := req.Validate(); err != nil {
		return res, fmt.Errorf("redisstore: %w", err)
	}
	id := req.RunID
	keys := []string{s.keys.run(id), s.keys.updates(id), s.keys.replies(id), s.keys.updateOrder(id)}
	v, err := s.run(ctx, updateScript, keys, id, req.ID, req.Name, storage.UpdateTopic(req.Name),
		mark(req.Payload), encodeHeaders(req.Headers), rand.Text())
	if err != nil {
		return res, fmt.Errorf("redisstore: send update to %q: %w", id, err)
	}
	list, err := status("send update", id, v)
	if err != nil {
		return res, err
	}
	if len(list) != 5 {
		return res, fmt.Errorf("redisstore: send update to %q: unexpected reply", id)
	}
	created, _ := list[1].(int64)
	delivered, _ := list[2].(int64)
	if res.Update, err = decodeUpdate(id, req.ID, str(list[3]), str(list[4])); err != nil {
		return res, err
	}
	res.Created, res.Delivered = created == 1, delivered == 1
	return res, nil
}

// GetUpdate implements storage.Interactor.
func (s *Store) GetUpdate(ctx context.Context, runID, id string) (storage.UpdateRecord, error) {
	if err := storage.ValidateRunRef("get update", runID); err != nil {
		return storage.UpdateRecord{}, fmt.Errorf("redisstore: %w", err)
	}
	if err := storage.CheckUpdateID(id); err != nil {
		return storage.UpdateRecord{}, fmt.Errorf("redisstore: get update: %w", err)
	}
	ups, err := s.readUpdates(ctx, runID, id, 0, 0)
	if err != nil {
		return storage.UpdateRecord{}, err
	}
	if len(ups) == 0 {
		return storage.UpdateRecord{}, fmt.Errorf("redisstore: update %q of run %q: %w", id, runID, storage.ErrUpdateNotFound)
	}
	return ups[0], nil
}

// ListUpdates implements storage.Interactor: a range of the run's update
// order, whose index is the Seq less one, so a page costs its size.
func (s *Store) ListUpdates(ctx context.Context, q storage.UpdatesQuery) ([]storage.UpdateRecord, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	first, last, ok := indexRange(q.After, q.PageSize())
	if !ok {
		return nil, nil
	}
	return s.readUpdates(ctx, q.RunID, "", first, last)
}

// readUpdates reads update id of a run, or when id is "" those at
// indexes first to last of its update order.
func (s *Store) readUpdates(ctx context.Context, runID, id string, first, last int64) ([]storage.UpdateRecord, error) {
	keys := []string{s.keys.updates(runID), s.keys.replies(runID), s.keys.updateOrder(runID)}
	v, err := s.run(ctx, updatesScript, keys, id, first, last)
	if err != nil {
		return nil, fmt.Errorf("redisstore: read updates of %q: %w", runID, err)
	}
	list, ok := v.([]any)
	if !ok || len(list)%3 != 0 {
		return nil, fmt.Errorf("redisstore: read updates of %q: unexpected reply", runID)
	}
	var out []storage.UpdateRecord
	for i := 0; i < len(list); i += 3 {
		u, err := decodeUpdate(runID, str(list[i]), str(list[i+1]), str(list[i+2]))
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// ReadStream implements storage.Interactor: one read-only script reads
// the run's status, the range of the stream's list and its length and
// state, so they are of one moment.
func (s *Store) ReadStream(ctx context.Context, q storage.StreamQuery) (storage.StreamPage, error) {
	var page storage.StreamPage
	if err := q.Validate(); err != nil {
		return page, fmt.Errorf("redisstore: %w", err)
	}
	page.Next = q.From
	first, last, ok := indexRange(q.From, q.PageSize())
	if !ok {
		// no list holds an offset that far; only the rest is read
		first, last = 1, 0
	}
	keys := []string{s.keys.run(q.RunID), s.keys.streamValues(q.RunID, q.Stream), s.keys.streams(q.RunID)}
	v, err := s.run(ctx, streamScript, keys, q.Stream, first, last)
	if err != nil {
		return page, fmt.Errorf("redisstore: read stream %q of %q: %w", q.Stream, q.RunID, err)
	}
	list, err := status("read stream of", q.RunID, v)
	if err != nil {
		return page, err
	}
	if len(list) != 5 {
		return page, fmt.Errorf("redisstore: read stream %q of %q: unexpected reply", q.Stream, q.RunID)
	}
	page.RunStatus = storage.RunStatus(str(list[1]))
	page.Length, _ = list[2].(int64)
	if page.Closed, _, err = decodeStreamState(str(list[3])); err != nil {
		return page, err
	}
	raw, _ := list[4].([]any)
	if len(raw) > 0 {
		page.Values = make([]storage.StreamValue, len(raw))
		for i, x := range raw {
			if page.Values[i], err = decodeStreamValue(q.From+int64(i), str(x)); err != nil {
				return page, err
			}
		}
	}
	page.Next = q.From + int64(len(raw))
	return page, nil
}

// ListStreams implements storage.Interactor.
func (s *Store) ListStreams(ctx context.Context, runID string) ([]storage.StreamInfo, error) {
	if err := storage.ValidateRunRef("list streams", runID); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	v, err := s.run(ctx, streamsScript, []string{s.keys.run(runID), s.keys.streams(runID)}, runID)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list streams of %q: %w", runID, err)
	}
	list, err := status("list streams of", runID, v)
	if err != nil {
		return nil, err
	}
	if len(list)%3 != 1 {
		return nil, fmt.Errorf("redisstore: list streams of %q: unexpected reply", runID)
	}
	var out []storage.StreamInfo
	for i := 1; i < len(list); i += 3 {
		info := storage.StreamInfo{Name: str(list[i])}
		info.Length, _ = list[i+1].(int64)
		if info.Closed, info.UpdatedAt, err = decodeStreamState(str(list[i+2])); err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b storage.StreamInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// indexRange is the first and last index of a list range of n entries
// from index from, and false when the range begins beyond any list's
// indexes (a Redis list index is an int64).
func indexRange(from int64, n int) (first, last int64, ok bool) {
	if from > math.MaxInt64-int64(n) {
		return 0, 0, false
	}
	return from, from + int64(n) - 1, true
}

// interactArgs appends a checkpoint's reply and stream writes as
// interact.lua reads them: the update ID ("" for none), marked output and
// error JSON of the reply, the number of writes, and for each its stream,
// close flag, number of values and the marked values.
func interactArgs(args []any, reply *storage.UpdateReply, streams []storage.StreamWrite) ([]any, error) {
	if reply == nil {
		args = append(args, "", "", "")
	} else {
		errJSON, err := encodeError(reply.Error)
		if err != nil {
			return nil, err
		}
		args = append(args, reply.ID, mark(reply.Output), errJSON)
	}
	args = append(args, len(streams))
	for _, w := range streams {
		closed := ""
		if w.Close {
			closed = "1"
		}
		args = append(args, w.Stream, closed, len(w.Values))
		for _, v := range w.Values {
			args = append(args, mark(v))
		}
	}
	return args, nil
}

// interactFields is how many script arguments interactArgs appends.
func interactFields(streams []storage.StreamWrite) int {
	n := 4
	for _, w := range streams {
		n += 3 + len(w.Values)
	}
	return n
}

// badAttrs reads interact.lua's refusal of attributes that would make
// the run hold more than storage.MaxAttributes, or returns nil.
func badAttrs(runID string, v any) error {
	list, ok := v.([]any)
	if !ok || len(list) != 2 || list[0] != "BADATTR" {
		return nil
	}
	n, _ := list[1].(int64)
	return fmt.Errorf("redisstore: checkpoint %q: set attributes: the run would hold %d attributes, over the limit of %d: %w",
		runID, n, storage.MaxAttributes, storage.ErrInvalidArgument)
}

// badReply reads interact.lua's refusal of a reply to an update the run
// does not have, or returns nil.
func badReply(runID string, v any) error {
	list, ok := v.([]any)
	if !ok || len(list) != 2 || list[0] != "BADARG" {
		return nil
	}
	return fmt.Errorf("redisstore: checkpoint %q: a reply to update %q, which the run does not have: %w", runID, str(list[1]), storage.ErrInvalidArgument)
}

// decodeUpdate builds an update record from its encoded request, as
// update.lua writes it (seq \n created \n name \n headers JSON \n marked
// payload), and its encoded reply, as interact.lua writes it (replied at
// \n error JSON \n marked output; "" while pending).
func decodeUpdate(runID, id, req, reply string) (storage.UpdateRecord, error) {
	u := storage.UpdateRecord{RunID: runID, ID: id, State: storage.UpdatePending}
	bad := func(err error) (storage.UpdateRecord, error) {
		return u, fmt.Errorf("redisstore: bad stored update %q of run %q: %w", id, runID, err)
	}
	parts := strings.SplitN(req, "\n", 5)
	if len(parts) != 5 {
		return bad(fmt.Errorf("%d fields", len(parts)))
	}
	var err error
	if u.Seq, err = strconv.ParseInt(parts[0], 10, 64); err != nil {
		return bad(err)
	}
	if u.CreatedAt, err = fromMicros(parts[1]); err != nil {
		return bad(err)
	}
	u.Name = parts[2]
	if u.Headers, err = decodeHeaders(parts[3]); err != nil {
		return bad(err)
	}
	u.Payload = unmark(parts[4])
	if reply == "" {
		return u, nil
	}
	parts = strings.SplitN(reply, "\n", 3)
	if len(parts) != 3 {
		return bad(fmt.Errorf("reply of %d fields", len(parts)))
	}
	at, err := fromMicros(parts[0])
	if err != nil {
		return bad(err)
	}
	if u.Error, err = decodeError(parts[1]); err != nil {
		return bad(err)
	}
	u.State, u.RepliedAt, u.Reply = storage.UpdateReplied, &at, unmark(parts[2])
	return u, nil
}

// decodeStreamValue reads a stream value as interact.lua writes it:
// written at \n marked value.
func decodeStreamValue(offset int64, s string) (storage.StreamValue, error) {
	at, val, ok := strings.Cut(s, "\n")
	if !ok {
		return storage.StreamValue{}, fmt.Errorf("redisstore: bad stored stream value at offset %d", offset)
	}
	t, err := fromMicros(at)
	if err != nil {
		return storage.StreamValue{}, err
	}
	return storage.StreamValue{Offset: offset, Value: unmark(val), WrittenAt: t}, nil
}

// decodeStreamState reads a stream's entry of the run's stream metadata
// as interact.lua writes it: closed (1 or 0) \n last written. "" is a
// stream never written: open.
func decodeStreamState(s string) (closed bool, updated time.Time, err error) {
	if s == "" {
		return false, time.Time{}, nil
	}
	flag, at, ok := strings.Cut(s, "\n")
	if !ok {
		return false, time.Time{}, fmt.Errorf("redisstore: bad stored stream state %q", s)
	}
	if updated, err = fromMicros(at); err != nil {
		return false, time.Time{}, err
	}
	return flag == "1", updated, nil
}
