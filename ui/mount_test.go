package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/ui"
)

// urlAttr finds the URLs a page's elements hold.
var urlAttr = regexp.MustCompile(`\b(href|src|action)="([^"]*)"`)

// Mounted under a prefix with http.StripPrefix, every link, form action
// and asset of every page resolves under the prefix, and so do the
// redirects.
func TestMountedUnderAPrefix(t *testing.T) {
	t.Parallel()
	d := newDash(t, true, nil)
	d.start("flaky", "flaky-1", `0`)
	d.start("approval", "order-1", `{}`)
	d.waitSleeping("flaky-1")
	d.waitStatus("order-1", "waiting")
	seedOps(t, d)
	const prefix = "/ops/stem"
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, d.h))
	d.h = mux

	res := d.get(prefix + "/")
	if res.StatusCode != http.StatusFound || resolve(t, prefix+"/", res.Header.Get("Location")) != prefix+"/runs" {
		t.Fatalf("GET %s/: %d to %q, want a redirect to %s/runs", prefix, res.StatusCode, res.Header.Get("Location"), prefix)
	}
	pages := []string{"/runs", "/runs?workflow=flaky&status=waiting", "/runs/flaky-1", "/runs/flaky-1%2Fship", "/runs/order-1",
		"/runs/order-1?execution=1", "/queues", "/schedules", "/workers", "/runs/nope", "/nowhere/at/all"}
	seen := map[string]bool{}
	for _, p := range pages {
		from := prefix + p
		res := d.get(from)
		if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusNotFound {
			t.Fatalf("GET %s: %d\n%s", from, res.StatusCode, res.body)
		}
		for _, m := range urlAttr.FindAllStringSubmatch(res.body, -1) {
			ref := unescape(m[2])
			got := resolve(t, from, ref)
			if !strings.HasPrefix(got, prefix+"/") {
				t.Errorf("GET %s: %s=%q resolves to %s, outside %s", from, m[1], ref, got, prefix)
			}
			if m[1] != "action" && !seen[got] {
				seen[got] = true
				if r := d.get(got); r.StatusCode != http.StatusOK {
					t.Errorf("GET %s: %s=%q leads to %s, which answers %d", from, m[1], ref, got, r.StatusCode)
				}
			}
		}
	}

	// An action's redirect leads back under the prefix.
	cookie, token := d.session(prefix + "/runs/flaky-1%2Fship")
	target := prefix + "/runs/flaky-1%2Fship/restart"
	res = d.post(target, url.Values{"csrf": {token}}, cookie).want(t, http.StatusSeeOther)
	if loc := resolve(t, target, res.Header.Get("Location")); !strings.HasPrefix(loc, prefix+"/runs/flaky-1%2Fship?flash=") {
		t.Fatalf("the redirect leads to %s", loc)
	}
	if kind, msg := flashOf(d.follow(target, res).body); kind != "ok" {
		t.Fatalf("restart under the prefix: flash %q %q", kind, msg)
	}
}

// seedOps records a queue, a schedule and a worker, for the pages that
// list them.
func seedOps(t *testing.T, d *dash) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	must(t, d.store.PutCatalog(ctx, storage.Catalog{Queues: []storage.QueueType{{
		Queue: storage.Queue{Name: "slow", Concurrency: 2, PartitionConcurrency: 1, Rate: 10, RatePeriod: time.Minute}, Worker: "w-<1>", UpdatedAt: now,
	}}}))
	_, err := d.store.WriteSchedule(ctx, storage.ScheduleWrite{Schedule: storage.Schedule{
		ID: "nightly", Workflow: "flaky", Cron: "0 3 * * *", TimeZone: "Europe/Paris", Input: []byte(`0`),
		NextFireAt: now.Add(time.Hour), CheckAt: now.Add(time.Hour), LastRunID: "flaky-1", LastFireAt: &now,
	}})
	must(t, err)
	must(t, d.store.PutWorker(ctx, storage.PutWorkerRequest{TTL: time.Hour, Worker: storage.Worker{
		ID: `host/1/<w>"`, Host: "host-a", PID: 4242, StartedAt: now, Queues: []string{"default", "slow"}, Workflows: []string{"flaky"}, InFlight: 3,
	}}))
}

// The queues page counts each queue's runs by state with its limits; the
// schedules and workers pages list theirs.
func TestQueuesSchedulesAndWorkers(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	seedOps(t, d)
	ctx := context.Background()
	_, err := d.store.CreateRuns(ctx, []storage.NewRun{{ID: "a", Workflow: "nobody", Queue: "slow"}, {ID: "b", Workflow: "nobody", Queue: "slow"}, {ID: "c", Workflow: "nobody"}})
	must(t, err)
	must(t, d.e.Pause(ctx, "b"))

	q := d.get("/queues").want(t, http.StatusOK)
	q.contains(t, `<table id="queues"`, `<tr data-queue="default">`, `<tr data-queue="slow">`,
		`<td class="limits">concurrency 2, 1 per partition, 10 per 1m</td>`, `<span class="mono">w-&lt;1&gt;</span>`,
		`<a href="./runs?queue=slow">slow</a>`)
	slow := q.body[strings.Index(q.body, `<tr data-queue="slow">`):]
	if !strings.HasPrefix(slow, `<tr data-queue="slow"><td><a href="./runs?queue=slow">slow</a></td><td class="num ready">1</td><td class="num">0</td><td class="num running">0</td><td class="num">0</td><td class="num">1</td>`) {
		t.Errorf("the slow queue's row: %.300s", slow)
	}

	s := d.get("/schedules").want(t, http.StatusOK)
	s.contains(t, `<table id="schedules"`, `<tr data-schedule="nightly">`, `<code>0 3 * * *</code> <span class="tz">Europe/Paris</span>`,
		`<a class="run-link" href="./runs/flaky-1">flaky-1</a>`, `<a href="./runs?workflow=flaky">flaky</a>`, `<a id="first"`).lacks(t, `id="next"`)

	w := d.get("/workers").want(t, http.StatusOK)
	w.contains(t, `<table id="workers"`, `<tr data-worker="host/1/&lt;w&gt;&#34;">`, "host-a", "4242", `<td class="num">3</td>`,
		`<a href="./runs?queue=slow">slow</a>`)

	empty := newDash(t, false, nil)
	empty.get("/schedules").want(t, http.StatusOK).contains(t, `<p id="no-schedules"`)
	empty.get("/workers").want(t, http.StatusOK).contains(t, `<p id="no-workers"`)
}

// Schedules are listed a page at a time.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	ctx := context.Background()
	now := time.Now().UTC()
	for i := range 60 {
		_, err := d.store.WriteSchedule(ctx, storage.ScheduleWrite{Schedule: storage.Schedule{
			ID: "s" + string(rune('A'+i/26)) + string(rune('a'+i%26)), Workflow: "w", Cron: "* * * * *", NextFireAt: now, CheckAt: now, Paused: i%2 == 0,
		}})
		must(t, err)
	}
	rows := regexp.MustCompile(`<tr data-schedule="`)
	first := d.get("/schedules").want(t, http.StatusOK)
	nx := next(t, "/schedules", first)
	if n := len(rows.FindAllString(first.body, -1)); n != 50 || nx == "" {
		t.Fatalf("first page: %d schedules, next %q", n, nx)
	}
	second := d.get(nx).want(t, http.StatusOK)
	if n := len(rows.FindAllString(second.body, -1)); n != 10 || next(t, nx, second) != "" {
		t.Fatalf("second page: %d schedules", n)
	}
	second.contains(t, `<tr data-schedule="sCg" class="paused">`, `<tr data-schedule="sCh"><td class="mono">`)
}

// A dashboard built with a bad CSRFKey is refused at once, and Refresh
// below zero turns refreshing off.
func TestOptions(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	defer func() {
		if recover() == nil {
			t.Error("a 5-byte CSRFKey was taken")
		}
	}()
	h := ui.New(d.e, ui.Options{Refresh: -1, AllowedHosts: testHosts})
	d.h = h
	d.get("/runs").want(t, http.StatusOK).lacks(t, "data-refresh")
	key := []byte(strings.Repeat("k", 32))
	a, b := ui.New(d.e, ui.Options{CSRFKey: key, AllowedHosts: testHosts}), ui.New(d.e, ui.Options{CSRFKey: key, AllowedHosts: testHosts})
	_, err := d.store.CreateRuns(context.Background(), []storage.NewRun{{ID: "r", Workflow: "nobody"}})
	must(t, err)
	d.h = a
	cookie, token := d.session("/runs/r")
	d.h = b
	d.post("/runs/r/pause", url.Values{"csrf": {token}}, cookie).want(t, http.StatusSeeOther)
	if st := d.status("r"); st != runtime.StatusPaused {
		t.Fatalf("a token of one dashboard was refused by another with its key: run is %s", st)
	}
	ui.New(d.e, ui.Options{CSRFKey: []byte("short")})
}
