package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/stemflow/stem/runtime"
)

// maxActionBody caps an action's form: an event's payload at the engine's
// default limit, with room for the rest. The engine refuses a payload over
// its own limit in words.
const maxActionBody = runtime.DefaultMaxPayloadBytes + 64<<10

func (h *handler) actByPath(rq *request) error {
	return h.act(rq, rq.r.PathValue("id"), rq.r.PathValue("action"))
}

// actByQuery serves runs/?id=ID&do=ACTION, the actions of a run whose ID
// is a dot segment.
func (h *handler) actByQuery(rq *request) error {
	q := rq.r.URL.Query()
	if !q.Has("id") || !q.Has("do") {
		return h.notFound(rq)
	}
	return h.act(rq, q.Get("id"), q.Get("do"))
}

// act performs one action on a run and redirects to the run's page,
// which shows the outcome (Post/Redirect/Get). A refused request (no
// access, another origin, no token) is a 403 page and changes nothing.
func (h *handler) act(rq *request, id, action string) error {
	do, ok := actionFuncs[action]
	if !ok {
		return &httpError{status: http.StatusNotFound, title: "No such action",
			msg: fmt.Sprintf("%q is not an action: a run may be paused, resumed, cancelled, terminated, restarted, sent an event or sent an update.", action)}
	}
	rq.r.Body = http.MaxBytesReader(rq.w, rq.r.Body, maxActionBody)
	if err := h.checkPost(rq); err != nil {
		return err
	}
	f := do(h, rq, id)
	if f.notFound {
		return runErr(id, runtime.ErrRunNotFound)
	}
	h.log.Info("ui: action", "action", action, "run", id, "outcome", f.Kind, "message", f.Message)
	loc := withQuery(rq.base+runPath(id, ""), url.Values{"flash": {h.flashToken(id, f.flash)}})
	redirect(rq.w, loc, http.StatusSeeOther)
	return nil
}

// outcome is what an action did: a flash, or that the run is not there.
type outcome struct {
	flash
	notFound bool
}

func done(format string, args ...any) outcome {
	return outcome{flash: flash{Kind: "ok", Message: fmt.Sprintf(format, args...)}}
}

// refused words the engine's refusal of an action.
func refused(what string, err error) outcome {
	if errors.Is(err, runtime.ErrRunNotFound) {
		return outcome{notFound: true}
	}
	return outcome{flash: flash{Kind: "error", Message: "Could not " + what + ": " + err.Error()}}
}

// keyRefused is the refusal of an action that would write a payload
// sealed with a codec key no live worker holds, which the workers could
// never open; ok is false when the write may go ahead (no codec key, a
// live worker holds it, or no live worker is recorded to say).
func keyRefused(h *handler, rq *request, what string) (outcome, bool) {
	if _, err := h.e.CheckKeyHeld(rq.r.Context(), h.e.SealKeyID()); err != nil {
		return refused(what, err), true
	}
	return outcome{}, false
}

var actionFuncs = map[string]func(h *handler, rq *request, id string) outcome{
	"update": sendUpdate,
	"pause": func(h *handler, rq *request, id string) outcome {
		ctx := rq.r.Context()
		if err := h.e.Pause(ctx, id); err != nil {
			return refused("pause the run", err)
		}
		if info, err := h.e.Get(ctx, id); err == nil && info.Status != runtime.StatusPaused {
			return done("Pause requested: the run pauses at its next step boundary.")
		}
		return done("Paused. It stays paused until it is resumed.")
	},
	"resume": func(h *handler, rq *request, id string) outcome {
		if err := h.e.Resume(rq.r.Context(), id); err != nil {
			return refused("resume the run", err)
		}
		return done("Resumed.")
	},
	"cancel": func(h *handler, rq *request, id string) outcome {
		reason := strings.TrimSpace(rq.r.PostForm.Get("reason"))
		if err := h.e.Cancel(rq.r.Context(), id, reason); err != nil {
			return refused("cancel the run", err)
		}
		return done("Cancellation requested: the workflow sees it at its next durable call, cleans up and ends itself.")
	},
	"terminate": func(h *handler, rq *request, id string) outcome {
		reason := strings.TrimSpace(rq.r.PostForm.Get("reason"))
		// The run's error text, reason and all, is sealed with the codec.
		if o, refuse := keyRefused(h, rq, "terminate the run"); refuse {
			return o
		}
		if err := h.e.Terminate(rq.r.Context(), id, reason); err != nil {
			return refused("terminate the run", err)
		}
		if reason == "" {
			return done("Terminated.")
		}
		return done("Terminated: %s", reason)
	},
	"restart": func(h *handler, rq *request, id string) outcome {
		step := rq.r.PostForm.Get("step")
		var opts []runtime.RestartOption
		if step != "" {
			opts = append(opts, runtime.FromStep(step))
		}
		if err := h.e.Restart(rq.r.Context(), id, opts...); err != nil {
			return refused("restart the run", err)
		}
		if step == "" {
			return done("Restarted from the top: a new execution begins.")
		}
		return done("Restarted from step %s: a new execution begins there, keeping the steps before it.", step)
	},
	"event": func(h *handler, rq *request, id string) outcome {
		topic := strings.TrimSpace(rq.r.PostForm.Get("topic"))
		raw := strings.TrimSpace(rq.r.PostForm.Get("payload"))
		switch {
		case topic == "":
			return outcome{flash: flash{Kind: "error", Message: "Could not send the event: it needs a topic."}}
		case raw == "":
			return outcome{flash: flash{Kind: "error", Message: "Could not send the event: its payload is empty; send null for none."}}
		}
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return outcome{flash: flash{Kind: "error", Message: "Could not send the event: its payload is not JSON: " + err.Error()}}
		}
		if o, refuse := keyRefused(h, rq, "send the event"); refuse {
			return o
		}
		if err := h.e.SendEventJSON(rq.r.Context(), id, topic, json.RawMessage(raw)); err != nil {
			return refused("send the event", err)
		}
		return done("Event %s sent.", topic)
	},
}
