package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// A run's updates and streams, as its page shows them, and the action
// that sends it an update.

// DefaultUpdateWait is how long an update sent from a run's page waits
// for the workflow's reply when Options.UpdateWait is zero.
const DefaultUpdateWait = 5 * time.Second

const (
	// updatesShown is how many of a run's updates its page lists: the
	// latest.
	updatesShown = 25
	// streamsShown caps the streams a run's page lists, and valuesShown
	// the values it shows of each: the last.
	streamsShown = 20
	valuesShown  = 5
	// replyShown caps the reply an update's outcome quotes.
	replyShown = 500
)

// updateRow is one update of the run.
type updateRow struct {
	Seq int64
	ID  string
	// Name is the update's; State is pending, replied, failed (replied
	// with an error) or unhandled (pending, and the run has ended).
	Name, State    string
	Request, Reply *payload
	Error          *text
	ErrorName      string
	// Sealed says why a payload could not be opened.
	Sealed        string
	Sent, Replied *moment
}

// streamView is one stream of the run, with its last values.
type streamView struct {
	Name   string
	Length int64
	Closed bool
	// From is the offset of the first value shown.
	From    int64
	Values  []streamValue
	Updated *moment
	// Sealed says why the values could not be opened.
	Sealed string
}

// streamValue is one value of a stream.
type streamValue struct {
	Offset int64
	Value  *payload
	At     *moment
}

// updateChoice is an update the run's form may send: one the catalog
// records, with its request's schema.
type updateChoice struct {
	Name      string
	Validator bool
	Schema    *payload
}

// interactions fills the run's updates (the latest updatesShown) and
// streams (each with its last valuesShown values) into p.
func (h *handler) interactions(ctx context.Context, p *runPage) error {
	var after int64
	for {
		page, err := h.e.Updates(ctx, p.ID, after, storage.MaxUpdatesPage)
		if err != nil {
			return err
		}
		p.UpdatesTotal += len(page)
		for _, u := range page {
			p.Updates = append(p.Updates, h.updateRow(u, p.Status))
		}
		if n := len(p.Updates); n > updatesShown {
			p.Updates = slices.Clone(p.Updates[n-updatesShown:])
		}
		if len(page) < storage.MaxUpdatesPage {
			break
		}
		after = page[len(page)-1].Seq
	}
	infos, err := h.e.Streams(ctx, p.ID)
	if err != nil {
		return err
	}
	if len(infos) > streamsShown {
		p.MoreStreams = len(infos) - streamsShown
		infos = infos[:streamsShown]
	}
	for _, s := range infos {
		v := streamView{Name: s.Name, Length: s.Length, Closed: s.Closed, From: max(0, s.Length-valuesShown), Updated: at(s.UpdatedAt)}
		if s.Length > 0 {
			for sv, err := range h.e.StreamJSON(ctx, p.ID, s.Name, v.From, false) {
				if err != nil {
					var se *runtime.SealedError
					if !errors.As(err, &se) {
						return err
					}
					v.Sealed = err.Error()
					break
				}
				v.Values = append(v.Values, streamValue{Offset: sv.Offset, Value: prettyJSON(sv.Value), At: at(sv.WrittenAt)})
				if sv.Offset+1 >= s.Length {
					break // the values the listing counted, no more
				}
			}
		}
		p.Streams = append(p.Streams, v)
	}
	return nil
}

// updateRow is u as the page shows it; run is its run's status.
func (h *handler) updateRow(u storage.UpdateRecord, run storage.RunStatus) updateRow {
	r := updateRow{Seq: u.Seq, ID: u.ID, Name: u.Name, State: string(u.State), Sent: at(u.CreatedAt), Replied: atPtr(u.RepliedAt)}
	if u.Unhandled(run) {
		r.State = "unhandled"
	}
	req, rep, repErr, err := h.e.OpenUpdate(u)
	r.Request, r.Reply = prettyJSON(req), prettyJSON(rep)
	if repErr != nil {
		r.State = "failed"
		r.Error = longText(repErr.Error())
		r.ErrorName, _ = runtime.DeclaredErrorName(repErr)
	}
	r.Sealed = errText(err)
	return r
}

// updateChoices lists the updates the catalog records, for the form.
func updateChoices(cat storage.Catalog) []updateChoice {
	var out []updateChoice
	ups, _ := cat.Updates()
	for _, u := range ups {
		out = append(out, updateChoice{Name: u.Name, Validator: u.Schema.Validator, Schema: prettyJSON(u.Schema.Request)})
	}
	return out
}

// sendUpdate is the "update" action: it sends the update the form names
// with its request, unvalidated when the form says so, and waits a
// bounded time for the reply, which the outcome quotes; a reply that has
// not come by then is pending, and shows in the run's updates when it
// comes.
func sendUpdate(h *handler, rq *request, id string) outcome {
	ctx := rq.r.Context()
	name := strings.TrimSpace(rq.r.PostForm.Get("update"))
	raw := strings.TrimSpace(rq.r.PostForm.Get("request"))
	unvalidated := rq.r.PostForm.Get("unvalidated") != ""
	fail := func(format string, args ...any) outcome {
		return outcome{flash: flash{Kind: "error", Message: "Could not send the update: " + fmt.Sprintf(format, args...)}}
	}
	switch {
	case name == "":
		return fail("choose which update to send.")
	case raw == "":
		return fail("its request is empty; send null for none.")
	case !json.Valid([]byte(raw)):
		var v any
		return fail("its request is not JSON: %v", json.Unmarshal([]byte(raw), &v))
	}
	if o, refuse := keyRefused(h, rq, "send the update"); refuse {
		return o
	}
	hd, err := h.e.SendUpdateJSON(ctx, id, name, json.RawMessage(raw), unvalidated)
	if err != nil {
		return refused("send the update", err)
	}
	wait, cancel := context.WithTimeout(ctx, h.updateWait)
	defer cancel()
	u, err := h.e.AwaitUpdate(wait, hd)
	switch {
	case errors.Is(err, runtime.ErrUpdateUnhandled):
		return outcome{flash: flash{Kind: "error", Message: fmt.Sprintf("Update %s (%s) was sent, but the run ended without replying to it.", name, hd.ID)}}
	case err != nil && wait.Err() != nil && ctx.Err() == nil:
		return done("Update %s sent as %s. No reply within %s: it is pending, and its reply shows under Updates when it comes.", name, hd.ID, duration(h.updateWait))
	case err != nil:
		return refused("read the update's reply", err)
	}
	_, rep, repErr, err := h.e.OpenUpdate(u)
	switch {
	case repErr != nil:
		return outcome{flash: flash{Kind: "error", Message: fmt.Sprintf("Update %s (%s) replied with an error: %s", name, hd.ID, repErr.Error())}}
	case err != nil:
		return done("Update %s (%s) replied; its reply cannot be shown: %v", name, hd.ID, err)
	}
	reply := string(rep)
	if len(reply) > replyShown {
		reply = reply[:replyShown] + "…"
	}
	return done("Update %s (%s) replied: %s", name, hd.ID, reply)
}
