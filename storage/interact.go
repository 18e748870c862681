package storage

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Updates and streams: how callers talk to a running workflow.
//
// An update is a request to one run that expects a reply. The store records
// it (SendUpdate) under the run and the caller's update ID, so a caller that
// sends the same ID again, after a crash on either side, finds the first
// request and, once there is one, its reply: an update is handled once.
// The request reaches the workflow as an event on the run's reserved topic
// UpdateTopic(name), delivered, buffered and taken exactly as SendEvent's
// (a wait case of kind KindUpdate), in the order the updates were
// recorded. The workflow replies with a checkpoint whose request carries
// the reply (CheckpointRequest.Reply): the reply is written in the same
// atomic change as the checkpoint, and only when the checkpoint is, so a
// replay that finds the checkpoint never replies twice.
//
// A stream is a run's ordered, append-only sequence of values under a
// name. Values are appended with a checkpoint (CheckpointRequest.Streams),
// in the same atomic change and only when the checkpoint is written: an
// append belongs to the write that records it, so a retried step or a
// replayed workflow never appends twice. Offsets count from 0 per run and
// stream, in append order, and go on across the run's executions
// (ContinueAsNew, Restart). A stream is deleted with its run.
//
// Stores that announce run ends (FinishNotifier) announce, on the same
// channel and as hints only, each reply written (UpdateAnnouncement) and
// each checkpoint that appended to a stream (StreamAnnouncement), so
// callers waiting for a reply or reading a stream in another process wake
// at once. The announcements are not run IDs: an engine that waits only on
// runs passes over them.

// UpdateTopicPrefix begins the reserved topic on which the updates named
// N reach a run: UpdateTopic(N).
const UpdateTopicPrefix = ReservedTopicPrefix + "update/"

// UpdateTopic is the reserved topic the updates named name travel on.
func UpdateTopic(name string) string { return UpdateTopicPrefix + name }

// KindUpdate is the kind of the checkpoint an update's delivery writes: a
// wait case of this kind waits on an UpdateTopic, and its checkpoint's
// Output is the update's Payload.
const KindUpdate CheckpointKind = "update"

// KindReply is the kind of the checkpoint that carries a workflow's reply
// to an update (CheckpointRequest.Reply).
const KindReply CheckpointKind = "reply"

// KindStream is the kind of the checkpoint a workflow writes for its own
// appends to streams (CheckpointRequest.Streams); a step's appends ride
// with its own checkpoint instead.
const KindStream CheckpointKind = "stream"

// ErrUpdateNotFound: the run has no update of the ID.
var ErrUpdateNotFound = errors.New("stem: update not found")

// UpdateState is where an update is in its life.
type UpdateState string

// The update states. A pending update of a run that has ended will never
// be replied to: readers judge it unhandled (see UpdateRecord.Unhandled).
const (
	// UpdatePending: recorded, not replied to yet.
	UpdatePending UpdateState = "pending"
	// UpdateReplied: the workflow replied, with a value or an error.
	UpdateReplied UpdateState = "replied"
)

// MaxUpdateIDLen is the longest, in bytes, an update ID may be.
const MaxUpdateIDLen = MaxNameLen

// UpdateRequest is an update sent to a run; see Store.SendUpdate.
type UpdateRequest struct {
	RunID string
	// ID names the update within the run: sending an ID again finds the
	// update first recorded under it. 1 to MaxUpdateIDLen bytes of valid
	// UTF-8 without invisible characters (CheckUpdateID).
	ID string
	// Name is the update's durable name (a step name's rule): it reaches
	// the run on UpdateTopic(Name).
	Name string
	// Payload is the request, opaque to the store: the delivered
	// checkpoint's Output.
	Payload []byte
	// Headers are the caller's propagated context (a trace's), stored and
	// returned as given.
	Headers map[string]string
}

// UpdateRecord is an update as the store holds it.
type UpdateRecord struct {
	RunID   string
	ID      string
	Name    string
	Payload []byte
	Headers map[string]string
	// Seq is the update's place among the run's updates, from 1, in the
	// order the store recorded them: the order of acceptance, in which
	// the run's waits on one name take them.
	Seq   int64
	State UpdateState
	// Reply and Error are the workflow's reply, set once State is
	// UpdateReplied.
	Reply     []byte
	Error     *ErrorInfo
	CreatedAt time.Time
	RepliedAt *time.Time
}

// Unhandled reports whether the update will never be replied to: it is
// pending and its run, whose status is given, has ended. Read the run
// after the update; a run's reply and its end may be one change, so an
// update read pending before its run is read ended is read again before it
// is judged.
func (u UpdateRecord) Unhandled(run RunStatus) bool {
	return u.State == UpdatePending && run.Finished()
}

// UpdateResult reports a SendUpdate.
type UpdateResult struct {
	// Update is the update as stored: the one just recorded, or the one
	// first recorded under the ID.
	Update UpdateRecord
	// Created is false when an update of the ID existed; nothing was
	// written then.
	Created bool
	// Delivered is true when the update was delivered at once to a case
	// of the run's wait (as SendEvent's delivered).
	Delivered bool
}

// UpdateReply is a workflow's reply to an update, written with a
// checkpoint (CheckpointRequest.Reply).
type UpdateReply struct {
	// ID is the update's ID; the update is the request's run's.
	ID     string
	Output []byte
	Error  *ErrorInfo
}

// UpdatesQuery lists a run's updates; see Store.ListUpdates.
type UpdatesQuery struct {
	RunID string
	// After lists the updates whose Seq is above it.
	After int64
	// Limit bounds the page (0: DefaultPageSize, at most MaxUpdatesPage).
	Limit int
}

// StreamWrite appends values to one stream of the run, with a checkpoint
// (CheckpointRequest.Streams).
type StreamWrite struct {
	// Stream is the stream's durable name (a step name's rule).
	Stream string
	// Values are appended in order, each opaque to the store.
	Values [][]byte
	// Close closes the stream after Values: readers that reach its end
	// stop there. A later write of values opens it again.
	Close bool
}

// StreamQuery reads a stream; see Store.ReadStream.
type StreamQuery struct {
	RunID  string
	Stream string
	// From is the offset of the first value to read.
	From int64
	// Limit bounds the values read (0: DefaultPageSize, at most
	// MaxStreamPage).
	Limit int
}

// MaxStreamPage is the most values one ReadStream returns.
const MaxStreamPage = 10000

// MaxStreamWrite is the most values one checkpoint may append, over all
// its StreamWrites: one atomic change holds them all, and a store holds
// its other writers back while it makes it.
const MaxStreamWrite = 10000

// StreamValue is one value of a stream.
type StreamValue struct {
	Offset    int64
	Value     []byte
	WrittenAt time.Time
}

// StreamPage is what ReadStream read.
type StreamPage struct {
	// Values are the values from the query's From on, in offset order.
	Values []StreamValue
	// Next is the offset after the last value returned (From when none).
	Next int64
	// Length is the number of values the stream holds.
	Length int64
	// Closed reports whether the stream was closed after its last value.
	Closed bool
	// RunStatus is the run's status, read in the same read as the values:
	// a reader that has read Length values of a finished run has read
	// all it will ever hold.
	RunStatus RunStatus
}

// StreamInfo describes one stream of a run.
type StreamInfo struct {
	Name      string
	Length    int64
	Closed    bool
	UpdatedAt time.Time
}

// Interactor is the part of Store that carries updates and streams. Every
// store implements it; the conformance suite checks it.
type Interactor interface {
	// SendUpdate records an update for a run and delivers it, in one
	// atomic change. When the run has an update of the ID already,
	// nothing is written and that update is returned (Created false),
	// whatever its state and whatever the request's name or payload.
	// Otherwise an unknown run is ErrRunNotFound and a finished one
	// ErrInvalidState, with nothing written; a new update is recorded
	// pending with the run's next Seq and delivered as SendEvent delivers
	// an event on UpdateTopic(Name) with the request's payload: written
	// as the checkpoint of the waiting case (of kind KindUpdate) when the
	// run waits on that topic, buffered for the run otherwise, and taken
	// by its waits in Seq order.
	SendUpdate(ctx context.Context, req UpdateRequest) (UpdateResult, error)

	// GetUpdate returns a run's update, or ErrUpdateNotFound (also when
	// the run is unknown).
	GetUpdate(ctx context.Context, runID, id string) (UpdateRecord, error)

	// ListUpdates returns a run's updates in Seq order, from q.After on, at
	// most q.Limit of them. An unknown run has none.
	ListUpdates(ctx context.Context, q UpdatesQuery) ([]UpdateRecord, error)

	// ReadStream returns a run's stream values from q.From on, in offset
	// order, at most q.Limit of them, with the stream's length, whether it
	// is closed and the run's status, all read at one moment. A stream
	// never written is empty and open. An unknown run is ErrRunNotFound.
	ReadStream(ctx context.Context, q StreamQuery) (StreamPage, error)

	// ListStreams returns a run's streams, by name. An unknown run is
	// ErrRunNotFound.
	ListStreams(ctx context.Context, runID string) ([]StreamInfo, error)
}

// Announcement prefixes, each followed by a run ID, a unit separator and
// an update ID or stream name. No run ID holds the separator.
const (
	announceUpdate = "\x1fupdate\x1f"
	announceStream = "\x1fstream\x1f"
)

// UpdateAnnouncement is what a store announces on its finished channel
// when it writes a reply to update id of run.
func UpdateAnnouncement(run, id string) string { return announceUpdate + run + "\x1f" + id }

// StreamAnnouncement is what a store announces on its finished channel
// when it appends to (or closes) stream of run.
func StreamAnnouncement(run, stream string) string { return announceStream + run + "\x1f" + stream }

// Announced splits an announcement from a finished channel: a run's end
// (kind "", the run ID), a reply (kind "update") or a stream's write (kind
// "stream"), with the run ID and the update ID or stream name.
func Announced(s string) (kind, run, name string) {
	for _, p := range []struct{ prefix, kind string }{{announceUpdate, "update"}, {announceStream, "stream"}} {
		if rest, ok := strings.CutPrefix(s, p.prefix); ok {
			if run, name, ok := strings.Cut(rest, "\x1f"); ok {
				return p.kind, run, name
			}
		}
	}
	return "", s, ""
}

// CheckUpdateName checks an update's durable name: a step name's rule.
func CheckUpdateName(name string) error {
	return checkASCII("update name", name, nameChars, nameHint)
}

// CheckStreamName checks a stream's durable name: a step name's rule.
func CheckStreamName(name string) error {
	return checkASCII("stream name", name, nameChars, nameHint)
}

// CheckUpdateID checks an update ID a caller chooses: 1 to MaxUpdateIDLen
// bytes of valid UTF-8 without invisible characters.
func CheckUpdateID(id string) error {
	return checkVisible("update ID", id, MaxUpdateIDLen)
}

// Validate checks the request; see Store.SendUpdate.
func (r UpdateRequest) Validate() error {
	const what = "send update"
	if r.RunID == "" {
		return invalid(what, "update has an empty run ID")
	}
	if err := checkStorable("run ID", r.RunID); err != nil {
		return invalid(what, "%s", reason(err))
	}
	if err := CheckUpdateID(r.ID); err != nil {
		return invalid(what, "%s", reason(err))
	}
	if err := CheckUpdateName(r.Name); err != nil {
		return invalid(what, "%s", reason(err))
	}
	if err := ValidateHeaders(r.Headers); err != nil {
		return invalid(what, "%s", reason(err))
	}
	return nil
}

// Validate checks the query; see Store.ListUpdates.
func (q UpdatesQuery) Validate() error {
	const what = "list updates"
	if q.RunID == "" {
		return invalid(what, "empty run ID")
	}
	if err := checkStorable("run ID", q.RunID); err != nil {
		return invalid(what, "%s", reason(err))
	}
	if q.After < 0 {
		return invalid(what, "after %d is negative", q.After)
	}
	if q.Limit < 0 || q.Limit > MaxUpdatesPage {
		return invalid(what, "limit %d is outside 0..%d", q.Limit, MaxUpdatesPage)
	}
	return nil
}

// PageSize is the query's Limit, or DefaultPageSize when it has none.
func (q UpdatesQuery) PageSize() int { return pageSize(q.Limit) }

// MaxUpdatesPage is the most updates one ListUpdates returns.
const MaxUpdatesPage = 1000

// Validate checks the query; see Store.ReadStream.
func (q StreamQuery) Validate() error {
	const what = "read stream"
	if q.RunID == "" {
		return invalid(what, "empty run ID")
	}
	if err := checkStorable("run ID", q.RunID); err != nil {
		return invalid(what, "%s", reason(err))
	}
	if err := CheckStreamName(q.Stream); err != nil {
		return invalid(what, "%s", reason(err))
	}
	if q.From < 0 {
		return invalid(what, "offset %d is negative", q.From)
	}
	if q.Limit < 0 || q.Limit > MaxStreamPage {
		return invalid(what, "limit %d is outside 0..%d", q.Limit, MaxStreamPage)
	}
	return nil
}

// PageSize is the query's Limit, or DefaultPageSize when it has none.
func (q StreamQuery) PageSize() int { return pageSize(q.Limit) }

// validInteractions checks a checkpoint's reply and stream writes.
func validInteractions(reply *UpdateReply, streams []StreamWrite) error {
	const what = "checkpoint"
	if reply != nil {
		if err := CheckUpdateID(reply.ID); err != nil {
			return invalid(what, "reply: %s", reason(err))
		}
	}
	n := 0
	for _, w := range streams {
		if n += len(w.Values); n > MaxStreamWrite {
			return invalid(what, "a checkpoint appends at most %d stream values", MaxStreamWrite)
		}
		if err := CheckStreamName(w.Stream); err != nil {
			return invalid(what, "%s", reason(err))
		}
		if len(w.Values) == 0 && !w.Close {
			return invalid(what, "stream %q: a write appends values or closes the stream", w.Stream)
		}
	}
	return nil
}

// UpdateSchema is what a store's catalog records of an update an engine
// handles: the PayloadSchema of the catalog's event type of the update's
// topic (UpdateTopic), so tools that send updates by hand check a request
// as the handling engine's would be.
type UpdateSchema struct {
	// Request and Reply are the JSON Schemas of the request and the reply.
	Request json.RawMessage `json:"request,omitempty"`
	Reply   json.RawMessage `json:"reply,omitempty"`
	// Validator says the update has a validator, which only the
	// application's code can run: a tool that cannot run it must not send
	// the update unless told to.
	Validator bool `json:"validator,omitempty"`
}

// ValidateRunRef checks a run ID a read names (GetUpdate, ListStreams):
// not empty, valid UTF-8 without NUL, as every store can hold and look
// up. A malformed one is ErrInvalidArgument, in the words every store
// shares, what naming the call.
func ValidateRunRef(what, id string) error {
	if id == "" {
		return invalid(what, "empty run ID")
	}
	if err := checkStorable("run ID", id); err != nil {
		return invalid(what, "%s", reason(err))
	}
	return nil
}

// UpdateNameOf returns the update name an update topic carries (the
// inverse of UpdateTopic), and whether topic is an update topic.
func UpdateNameOf(topic string) (name string, ok bool) {
	return strings.CutPrefix(topic, UpdateTopicPrefix)
}

// CatalogUpdate is an update a store's catalog records: an event type on
// an update topic, its PayloadSchema read as an UpdateSchema.
type CatalogUpdate struct {
	Name   string
	Schema UpdateSchema
	// SchemaErr says why the record's PayloadSchema is not an
	// UpdateSchema; Schema is then empty.
	SchemaErr error
	Worker    string
	UpdatedAt time.Time
}

// Updates splits the catalog's event types into the updates it records
// (those on update topics), and the others, each in the catalog's order.
func (c Catalog) Updates() (updates []CatalogUpdate, events []EventType) {
	for _, ev := range c.Events {
		name, ok := UpdateNameOf(ev.Topic)
		if !ok {
			events = append(events, ev)
			continue
		}
		u := CatalogUpdate{Name: name, Worker: ev.Worker, UpdatedAt: ev.UpdatedAt}
		if len(ev.PayloadSchema) > 0 {
			if err := json.Unmarshal(ev.PayloadSchema, &u.Schema); err != nil {
				u.Schema, u.SchemaErr = UpdateSchema{}, err
			}
		}
		updates = append(updates, u)
	}
	return updates, events
}
