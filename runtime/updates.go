package runtime

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/stemflow/stem/internal/jsonschema"
	"github.com/stemflow/stem/storage"
)

// Updates: a caller asks a running workflow something and gets its reply.
//
// The caller sends an update (CallUpdate, or the generated
// Update<Name>): the engine checks the request (its Go type's decoding and
// the update's validator where the update is registered here, the schema
// the store's catalog records otherwise), and the store records it under
// the run and the update's ID, once: a caller that sends the same ID again,
// after a crash on either side, finds the first request and its reply,
// never a second handling. The workflow takes updates where it chooses
// (OnUpdate, AwaitUpdate), as it takes events, in the order the store
// accepted them, and replies (Update.Reply, Update.Fail) with a durable
// write that records the reply with it: a replay finds the reply written
// and does not send it again.

// Errors of updates, matched with errors.Is.
var (
	// ErrUpdateRefused: the update's validator refused the request; nothing
	// was written. The error also matches the validator's own error.
	ErrUpdateRefused = errors.New("stem: update refused")
	// ErrUpdateRunEnded: the run had ended when the update was sent;
	// nothing was written.
	ErrUpdateRunEnded = errors.New("stem: the run has ended; it takes no update")
	// ErrUpdateUnhandled: the run ended without replying to the update.
	ErrUpdateUnhandled = errors.New("stem: the run ended without replying to the update")
	// ErrUpdateNotFound: the run has no update of the ID.
	ErrUpdateNotFound = storage.ErrUpdateNotFound
)

// updateDef is an update registered with RegisterUpdate.
type updateDef struct {
	name     string
	req, rep reflect.Type
	// validate runs the update's validator on a decoded request; nil when
	// it has none.
	validate func(req any) error
}

// RegisterUpdate declares the update name, whose requests are Req and
// replies Rep, with validate (nil: none) as its validator: the engine
// checks every request it sends against Req and validate before anything
// is written, and records the update in the store's catalog with Req's and
// Rep's JSON Schemas, so tools that send updates by hand (the operator
// command, the dashboard) check a request as this engine would, and refuse
// to send an update with a validator they cannot run unless told to.
// Generated code registers every annotated update. An update registered
// again with other types is ErrInvalidArgument.
func RegisterUpdate[Req, Rep any](e *Engine, name string, validate func(Req) error) error {
	if err := storage.CheckUpdateName(name); err != nil {
		return err
	}
	d := &updateDef{name: name, req: reflect.TypeFor[Req](), rep: reflect.TypeFor[Rep]()}
	if validate != nil {
		d.validate = func(req any) error { return validate(req.(Req)) }
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if old, ok := e.updates[name]; ok && (old.req != d.req || old.rep != d.rep) {
		return invalidArg("update %q is registered with request %v and reply %v, not %v and %v", name, old.req, old.rep, d.req, d.rep)
	}
	e.updates[name] = d
	return nil
}

// UpdateOption configures one update a caller sends.
type UpdateOption func(*updateOptions)

type updateOptions struct {
	id string
}

// WithUpdateID gives the update its ID (by default a random one): sending
// an ID again, after a crash of the caller or of the worker, finds the
// update first sent under it and its reply, so the run handles it once.
// An ID is 1 to 128 bytes of UTF-8 without invisible characters, unique
// within the run.
func WithUpdateID(id string) UpdateOption {
	return func(o *updateOptions) { o.id = id }
}

// UpdateHandle is an update sent to a run: await its reply with
// AwaitReply.
type UpdateHandle struct {
	// RunID, ID and Name say which update it is.
	RunID, ID, Name string
	// Created is false when the run had an update of the ID already: the
	// handle is that update's.
	Created bool
}

// updateEnvelope is what an update's payload holds: its ID, which the
// workflow's reply names, and the request.
type updateEnvelope struct {
	ID      string            `json:"id"`
	Name    string            `json:"name"`
	Request json.RawMessage   `json:"request"`
	Headers map[string]string `json:"headers,omitempty"`
}

// SendUpdate sends the update name to run runID with request req, and
// returns its handle without waiting for the reply. The request is checked
// before anything is written: against the update's request type and its
// validator when the update is registered with this engine
// (RegisterUpdate), or else against the request schema the store's catalog
// records for it. A validator's refusal matches ErrUpdateRefused and the
// validator's error; a run that has ended is ErrUpdateRunEnded (unless it
// has an update of the ID, whose handle is returned); an unknown run is
// ErrRunNotFound.
func (e *Engine) SendUpdate(ctx context.Context, runID, name string, req any, opts ...UpdateOption) (UpdateHandle, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return UpdateHandle{}, fmt.Errorf("stem: encode the request of update %s: %w", name, err)
	}
	return e.sendUpdate(ctx, runID, name, raw, false, false, opts)
}

// SendUpdateJSON is SendUpdate for tools that have the request as JSON.
// An update whose catalog record says it has a validator is refused,
// unless unvalidated: only the application's code can run a validator.
func (e *Engine) SendUpdateJSON(ctx context.Context, runID, name string, req json.RawMessage, unvalidated bool, opts ...UpdateOption) (UpdateHandle, error) {
	return e.sendUpdate(ctx, runID, name, req, true, unvalidated, opts)
}

func (e *Engine) sendUpdate(ctx context.Context, runID, name string, raw json.RawMessage, tool, unvalidated bool, opts []UpdateOption) (UpdateHandle, error) {
	if err := e.checkOpen(); err != nil {
		return UpdateHandle{}, err
	}
	id, err := e.checkedUpdate(ctx, runID, name, raw, tool, unvalidated, opts)
	if err != nil {
		return UpdateHandle{}, err
	}
	return e.postUpdate(ctx, runID, name, id, raw)
}

// checkedUpdate checks an update's name, ID (from opts, or a random one,
// which it returns) and request before anything is written, as
// SendUpdate says.
func (e *Engine) checkedUpdate(ctx context.Context, runID, name string, raw json.RawMessage, tool, unvalidated bool, opts []UpdateOption) (id string, err error) {
	var o updateOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.id == "" {
		o.id = newUpdateID()
	}
	if err := storage.CheckUpdateID(o.id); err != nil {
		return "", err
	}
	if err := storage.CheckUpdateName(name); err != nil {
		return "", err
	}
	if err := e.checkUpdate(ctx, runID, name, raw, tool, unvalidated); err != nil {
		return "", err
	}
	return o.id, nil
}

// postUpdate records the update id, checked, and delivers it, through
// Hooks.Update.
func (e *Engine) postUpdate(ctx context.Context, runID, name, id string, raw json.RawMessage) (UpdateHandle, error) {
	hu := &HookUpdate{RunID: runID, ID: id, Name: name}
	var res storage.UpdateResult
	send := func(ctx context.Context) error {
		if err := storage.ValidateHeaders(hu.Headers); err != nil {
			return err
		}
		env, err := json.Marshal(updateEnvelope{ID: id, Name: name, Request: raw, Headers: hu.Headers})
		if err != nil {
			return fmt.Errorf("stem: encode update %s: %w", name, err)
		}
		sealed, err := e.payloads.encodeRaw("request of update "+name, env)
		if err != nil {
			return err
		}
		res, err = e.store.SendUpdate(ctx, storage.UpdateRequest{RunID: runID, ID: id, Name: name, Payload: sealed, Headers: hu.Headers})
		hu.Created = res.Created
		return err
	}
	var err error
	if h := e.hooks.Update; h != nil {
		err = h(ctx, hu, send)
	} else {
		err = send(ctx)
	}
	switch {
	case errors.Is(err, storage.ErrInvalidState):
		return UpdateHandle{}, fmt.Errorf("%w: update %s to run %s: %w", ErrUpdateRunEnded, name, runID, err)
	case err != nil:
		return UpdateHandle{}, err
	}
	if !res.Created && res.Update.Name != name {
		return UpdateHandle{}, invalidArg("run %s has update %q already, of update %q, not %q: give each update an ID of its own", runID, id, res.Update.Name, name)
	}
	if res.Created {
		if res.Delivered {
			e.signal()
		} else {
			e.arrivals.wake(runID) // buffered: a select of it that runs steps here takes it
		}
	}
	return UpdateHandle{RunID: runID, ID: id, Name: name, Created: res.Created}, nil
}

// newUpdateID returns a random update ID.
func newUpdateID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "u-" + hex.EncodeToString(b[:])
}

// checkUpdate checks an update's request before it is written, as
// SendUpdate says.
func (e *Engine) checkUpdate(ctx context.Context, runID, name string, raw json.RawMessage, tool, unvalidated bool) error {
	what := fmt.Sprintf("request of update %s", name)
	if err := e.checkJSON(what, raw); err != nil {
		return err
	}
	e.mu.Lock()
	d := e.updates[name]
	e.mu.Unlock()
	if d != nil {
		v := reflect.New(d.req)
		if err := decodeJSON(what, raw, e.cfg.MaxPayloadBytes, v.Interface()); err != nil {
			return fmt.Errorf("%w: update %q takes a %v, and the run would refuse this request: %w", ErrInvalidArgument, name, d.req, err)
		}
		if d.validate != nil {
			if err := d.validate(v.Elem().Interface()); err != nil {
				return fmt.Errorf("%w: update %s to run %s: %w", ErrUpdateRefused, name, runID, err)
			}
		}
		return nil
	}
	c, err := e.store.GetCatalog(ctx)
	if err != nil {
		return err
	}
	ups, _ := c.Updates()
	var known []string
	for _, u := range ups {
		known = append(known, u.Name)
		if u.Name != name {
			continue
		}
		if u.SchemaErr != nil {
			return fmt.Errorf("stem: the catalog's record of update %s is not an update schema: %w", name, u.SchemaErr)
		}
		if u.Schema.Validator && !unvalidated {
			return fmt.Errorf("%w: update %q has a validator, which only the application that handles it can run; send it from the application, or send it unvalidated", ErrInvalidArgument, name)
		}
		if err := checkSchema(what, u.Schema.Request, raw); err != nil {
			return fmt.Errorf("%w: update %q is recorded in the store's catalog with a request schema this one does not match: %w", ErrInvalidArgument, name, err)
		}
		return nil
	}
	// Neither registered here nor recorded: a tool is told, unless told to
	// send it unvalidated (the handling engine may not have recorded its
	// catalog yet); a program's send is not checked, as an event's on a
	// topic nobody declared is not.
	if tool && !unvalidated {
		return fmt.Errorf("%w: no engine that shares this store records update %q (known: %s); send it unvalidated to send it all the same", ErrInvalidArgument, name, listOrNone(known))
	}
	return nil
}

// updateSchemas returns the catalog's records of the updates registered,
// as event types of their topics. The caller holds e.mu.
func (e *Engine) updateSchemas(now time.Time) []storage.EventType {
	var out []storage.EventType
	for _, name := range slices.Sorted(maps.Keys(e.updates)) {
		d := e.updates[name]
		req, errReq := jsonschema.For(d.req)
		rep, errRep := jsonschema.For(d.rep)
		if err := cmpErr(errReq, errRep); err != nil {
			e.log.Warn("stem: no schema for an update's request or reply; tools will not check it", "update", name, "err", err)
		}
		s, _ := json.Marshal(storage.UpdateSchema{Request: req, Reply: rep, Validator: d.validate != nil})
		out = append(out, storage.EventType{Topic: storage.UpdateTopic(name), PayloadSchema: s, Worker: e.cfg.WorkerID, UpdatedAt: now})
	}
	return out
}

// AwaitReply waits for the reply to the update h and returns it decoded
// into Rep: the workflow's reply, or the error it replied with (declared
// errors keep their identity, as a run's do). A run that ends without
// replying is ErrUpdateUnhandled.
func AwaitReply[Rep any](ctx context.Context, e *Engine, h UpdateHandle) (Rep, error) {
	var zero Rep
	u, err := e.AwaitUpdate(ctx, h)
	if err != nil {
		return zero, err
	}
	if u.Error != nil {
		return zero, e.payloads.errorOf("reply to update "+h.ID, "", u.Error)
	}
	var out Rep
	if err := e.payloads.decode("reply to update "+h.ID, u.Reply, &out); err != nil {
		return zero, err
	}
	return out, nil
}

// CallUpdate sends the update name to run runID with request req and
// waits for the workflow's reply (SendUpdate, then AwaitReply). Give it an
// ID (WithUpdateID) to call it again after a crash without a second
// handling.
func CallUpdate[Rep any](ctx context.Context, e *Engine, runID, name string, req any, opts ...UpdateOption) (Rep, error) {
	h, err := e.SendUpdate(ctx, runID, name, req, opts...)
	if err != nil {
		var zero Rep
		return zero, err
	}
	return AwaitReply[Rep](ctx, e, h)
}

// AwaitUpdate waits until the update h is replied to and returns its
// record (the reply still as stored: sealed when the engine seals
// payloads). A run that ends without replying is ErrUpdateUnhandled.
func (e *Engine) AwaitUpdate(ctx context.Context, h UpdateHandle) (storage.UpdateRecord, error) {
	if err := e.checkOpen(); err != nil {
		return storage.UpdateRecord{}, err
	}
	p := e.newPoll()
	key := storage.UpdateAnnouncement(h.RunID, h.ID)
	for {
		// Watched before the read, so a reply written in between wakes
		// this caller.
		w := e.watch(key, h.RunID)
		u, err := e.readUpdate(ctx, h)
		if err != nil || u.State == storage.UpdateReplied {
			w.stop()
			return u, err
		}
		if err := w.wait(ctx, &p); err != nil {
			return storage.UpdateRecord{}, err
		}
	}
}

// readUpdate reads an update, and its run when the update is pending: a
// pending update of a run that ended is ErrUpdateUnhandled.
func (e *Engine) readUpdate(ctx context.Context, h UpdateHandle) (storage.UpdateRecord, error) {
	u, err := e.store.GetUpdate(ctx, h.RunID, h.ID)
	if err != nil || u.State == storage.UpdateReplied {
		return u, err
	}
	r, err := e.store.GetRun(ctx, h.RunID)
	if err != nil {
		return u, err
	}
	if !r.Status.Finished() {
		return u, nil
	}
	// The reply and the run's end may be one write: read the update again.
	if u, err = e.store.GetUpdate(ctx, h.RunID, h.ID); err != nil || u.State == storage.UpdateReplied {
		return u, err
	}
	return u, fmt.Errorf("%w: update %s (%s) of run %s, which ended %s", ErrUpdateUnhandled, h.ID, u.Name, h.RunID, r.Status)
}

// Update is an update a workflow took (OnUpdate, AwaitUpdate): the
// caller's request, and the means to reply to it.
type Update[Req, Rep any] struct {
	// ID is the update's ID, the caller's (WithUpdateID) or a random one.
	ID string `json:"id"`
	// Request is the caller's request.
	Request Req `json:"request"`
	// Headers are the sender's propagated context (a trace's; see
	// Hooks.Update), as sent.
	Headers map[string]string `json:"headers,omitempty"`
	// Name is the update's durable name.
	Name string `json:"name"`
}

// OnUpdate returns a future of the next update named update sent to this
// run, without waiting, as OnEvent does for an event: updates reach the
// run in the order the store accepted them, each taken by one future, and
// one taken by a future that lost a Select is kept for the next future of
// the update. name is the future's durable key within the run, numbered
// by call order, so it may be created in a loop. Reply to the update it
// yields with Update.Reply or Update.Fail.
func OnUpdate[Req, Rep any](c *WorkflowContext, name, update string) *Future[*Update[Req, Rep]] {
	return onDelivery[*Update[Req, Rep]](c, name, update, true)
}

// AwaitUpdate waits for the next update named update sent to this run and
// returns it: OnUpdate's future, awaited.
func AwaitUpdate[Req, Rep any](c *WorkflowContext, name, update string) (*Update[Req, Rep], error) {
	return OnUpdate[Req, Rep](c, name, update).Await()
}

// Reply replies rep to the update, durably: the reply is written with a
// checkpoint of the run, keyed by the update's ID, and returned to the
// caller. A replay finds it written and does not reply again; replying
// twice to one update in an execution is ErrDuplicateStep.
func (u *Update[Req, Rep]) Reply(c *WorkflowContext, rep Rep) error {
	return reply(c, u.hook(), rep, nil)
}

// hook is the update as the hooks see it.
func (u *Update[Req, Rep]) hook() HookUpdate {
	return HookUpdate{ID: u.ID, Name: u.Name, Headers: u.Headers}
}

// Fail replies err to the update: the caller's AwaitReply returns it
// (declared errors keep their identity), as Reply returns a value.
func (u *Update[Req, Rep]) Fail(c *WorkflowContext, err error) error {
	if err == nil {
		return invalidArg("Fail of update %q needs an error", u.ID)
	}
	return reply(c, u.hook(), nil, err)
}

// replyKey is the checkpoint key of the reply to update id.
func replyKey(id string) string { return "reply:" + id }

// reply writes the reply to update id: rep, or failure when not nil.
func reply(c *WorkflowContext, hu HookUpdate, rep any, failure error) error {
	x := c.exec
	x.checkStopped()
	id := hu.ID
	if err := storage.CheckUpdateID(id); err != nil {
		return err
	}
	key, err := x.useCallKey(replyKey(id), false, asReply)
	if err != nil {
		return err
	}
	_, ok, err := x.begin(c.detached, "reply:"+id, key)
	if ok || err != nil {
		return err
	}
	e := x.engine
	r := &storage.UpdateReply{ID: id}
	if failure != nil {
		r.Error = e.payloads.sealInfo(errorInfo(failure))
	} else if r.Output, err = e.payloads.encode("reply to update "+id, rep); err != nil {
		return err
	}
	x.writeWith(storage.Checkpoint{Key: key, Kind: KindReply}, nil, false, &cpExtras{reply: r})
	if h := e.hooks.Reply; h != nil {
		hu.RunID, hu.Workflow, hu.Err = x.lease.RunID, x.workflow, failure
		h(x.ctx, hu)
	}
	return nil
}

// UpdateOrStart sends the update name with request req to the run id of
// the workflow named workflow, starting that run with input in first
// when it does not exist (update-with-start), and waits for the reply.
// The request is checked before anything is written, the start too; the
// start follows the start policies as Start does (opts: IfExists,
// IfEnded, the workflow's existing= and ended=), so a run that exists is
// updated, and one that a policy refuses is ErrStartRefused with no update
// sent. updateID (empty: a random one) makes a call made again after a
// crash find the first update and its reply, as WithUpdateID does.
func UpdateOrStart[In, Out, Rep any](ctx context.Context, e *Engine, workflow, id string, in In, name, updateID string, req any, opts ...StartOption) (Rep, error) {
	var zero Rep
	if err := e.checkOpen(); err != nil {
		return zero, err
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return zero, fmt.Errorf("stem: encode the request of update %s: %w", name, err)
	}
	// The update is checked once, before the start writes anything.
	uid, err := e.checkedUpdate(ctx, id, name, raw, false, false, []UpdateOption{WithUpdateID(updateID)})
	if err != nil {
		return zero, err
	}
	if _, err := Start[In, Out](ctx, e, workflow, in, append(opts, WithID(id))...); err != nil {
		return zero, err
	}
	h, err := e.postUpdate(ctx, id, name, uid, raw)
	if err != nil {
		return zero, err
	}
	return AwaitReply[Rep](ctx, e, h)
}

// failUntaken replies ErrUpdateUnhandled, before the run continues as new,
// to each update this execution took and did not reply to: the next
// execution does not see it, and its caller would otherwise wait until
// the run ends. Each reply is a durable call, in the order the updates
// were taken, so a replay that reaches the continue-as-new again finds
// them written. (Updates not taken yet stay buffered for the next
// execution.)
func (x *execution) failUntaken(c *WorkflowContext) {
	var taken []storage.Checkpoint
	x.cpMu.Lock()
	for _, cp := range x.checkpoints {
		if cp.Kind == KindUpdate && cp.Error == nil {
			taken = append(taken, cp)
		}
	}
	x.cpMu.Unlock()
	slices.SortFunc(taken, func(a, b storage.Checkpoint) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, cp := range taken {
		var env updateEnvelope
		if err := json.Unmarshal(cp.Output, &env); err != nil || env.ID == "" {
			continue // not an update this runtime sent; nobody awaits a reply to it
		}
		if _, ok := x.lookup(replyKey(env.ID)); ok {
			continue
		}
		err := fmt.Errorf("%w: run %s continued as new before replying to update %s (%s)", ErrUpdateUnhandled, x.lease.RunID, env.ID, env.Name)
		_ = reply(c, HookUpdate{ID: env.ID, Name: env.Name, Headers: env.Headers}, nil, err)
	}
}
