package ui_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/storage"
)

// scheduled is a dashboard with two schedules of the count workflow:
// nightly and hourly.
func scheduled(t *testing.T) *dash {
	d := newDash(t, false, nil)
	d.record(storage.WorkflowType{Name: "count", Version: 1, InputSchema: schemaOf(t, 0)})
	for _, s := range []schedule.Spec{{ID: "nightly", Workflow: "count", Cron: "0 2 * * *", Input: 7}, {ID: "hourly", Workflow: "count", Cron: "@hourly", Input: 1}} {
		if _, err := schedule.Create(context.Background(), d.e, s); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// scheduleAct posts a schedule's action as the schedules page's dialog
// does.
func (d *dash) scheduleAct(id, action string) *response {
	d.t.Helper()
	cookie, token := d.session("/schedules")
	return d.post("/schedules/"+url.PathEscape(id)+"/"+action, url.Values{"csrf": {token}}, cookie)
}

// Each schedule's row offers its actions, each in a dialog with a form
// that carries the token: pause (resume when paused), trigger now and
// delete. Each acts, and the schedules page (a trigger: the run's page)
// says what it did.
func TestScheduleActions(t *testing.T) {
	t.Parallel()
	d := scheduled(t)
	ctx := context.Background()
	d.get("/schedules").want(t, http.StatusOK).contains(t,
		`<button type="button" data-action="pause" data-dialog="dlg-pause-1">Pause</button>`,
		`<button type="button" data-action="trigger" data-dialog="dlg-trigger-1">Trigger now</button>`,
		`<button type="button" data-action="delete" data-dialog="dlg-delete-1" class="danger">Delete</button>`,
		`<dialog id="dlg-pause-1" class="confirm" data-schedule="nightly"><form method="post" action="./schedules/nightly/pause">`,
		`<dialog id="dlg-delete-0" class="confirm" data-schedule="hourly"><form method="post" action="./schedules/hourly/delete">`,
	)

	res := d.scheduleAct("nightly", "pause")
	if kind, msg := flashOf(d.follow("/schedules/nightly/pause", res).body); kind != "ok" || !strings.HasPrefix(msg, "Schedule nightly paused") {
		t.Errorf("pause: %s %q", kind, msg)
	}
	if s, err := schedule.Get(ctx, d.e, "nightly"); err != nil || !s.Paused {
		t.Fatalf("after pause: %+v %v", s, err)
	}
	d.get("/schedules").contains(t, `<button type="button" data-action="resume" data-dialog="dlg-resume-1">Resume</button>`,
		`<form method="post" action="./schedules/nightly/resume">`).lacks(t, `data-dialog="dlg-pause-1"`)

	res = d.scheduleAct("nightly", "resume")
	if kind, msg := flashOf(d.follow("/schedules/nightly/resume", res).body); kind != "ok" || !strings.Contains(msg, "Its next tick is at ") {
		t.Errorf("resume: %s %q", kind, msg)
	}
	if s, err := schedule.Get(ctx, d.e, "nightly"); err != nil || s.Paused {
		t.Fatalf("after resume: %+v %v", s, err)
	}

	res = d.scheduleAct("nightly", "trigger")
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "../../runs/nightly@manual-") {
		t.Fatalf("trigger: %d to %q", res.StatusCode, loc)
	}
	page := d.follow("/schedules/nightly/trigger", res)
	if kind, msg := flashOf(page.body); kind != "ok" || !strings.HasPrefix(msg, "Started by schedule nightly now") {
		t.Errorf("trigger: %s %q", kind, msg)
	}
	s, err := schedule.Get(ctx, d.e, "nightly")
	must(t, err)
	if info, err := d.e.Get(ctx, s.LastRunID); err != nil || string(info.Input) != "7" {
		t.Fatalf("the triggered run %q: %+v %v", s.LastRunID, info, err)
	}

	res = d.scheduleAct("hourly", "delete")
	if kind, msg := flashOf(d.follow("/schedules/hourly/delete", res).body); kind != "ok" || msg != "Schedule hourly deleted. The runs it started stay." {
		t.Errorf("delete: %s %q", kind, msg)
	}
	if _, err := schedule.Get(ctx, d.e, "hourly"); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	res = d.scheduleAct("hourly", "pause")
	if kind, msg := flashOf(d.follow("/schedules/hourly/pause", res).body); kind != "error" || msg != "Could not pause schedule hourly: it is not there (deleted meanwhile?)." {
		t.Errorf("pause of a deleted schedule: %s %q", kind, msg)
	}
	d.scheduleAct("nightly", "explode").want(t, http.StatusNotFound).contains(t, "a schedule may be paused, resumed, triggered or deleted")
}

// A schedule's actions are an operator's: read-only access sees none and
// may post none, and a post without the form's token changes nothing; a
// flash not signed by the dashboard is not shown.
func TestScheduleActionsNeedAnOperator(t *testing.T) {
	t.Parallel()
	d := scheduled(t)
	r := httpGet("/schedules")
	r.Header.Set("X-Test-Access", "read")
	d.do(r).want(t, http.StatusOK).contains(t, `data-schedule="nightly"`).lacks(t, "data-action=", "<dialog", "<th>Actions</th>")

	r = postRequest("/schedules/nightly/pause", url.Values{"csrf": {"x"}})
	r.Header.Set("X-Test-Access", "read")
	d.do(r).want(t, http.StatusForbidden)
	cookie, _ := d.session("/schedules")
	d.post("/schedules/nightly/delete", url.Values{"csrf": {"forged"}}, cookie).want(t, http.StatusForbidden)
	if s, err := schedule.Get(context.Background(), d.e, "nightly"); err != nil || s.Paused {
		t.Fatalf("after refused actions: %+v %v", s, err)
	}
	d.get("/schedules?flash="+url.QueryEscape("b2sKZm9yZ2Vk.AAAA")).lacks(t, `id="flash"`)
}
