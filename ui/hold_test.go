package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// holdSince is when the test's holds were made.
var holdSince = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

// hold makes run id, of a workflow no engine serves, held as an engine
// holds one: claimed after its checkpoints (again, when it parks on wait
// first, its timeout due), then handed back with h, ready in an hour.
func (d *dash) hold(id string, cps []storage.Checkpoint, wait *storage.Wait, h *storage.Hold) {
	d.t.Helper()
	ctx := context.Background()
	_, err := d.store.CreateRuns(ctx, []storage.NewRun{{ID: id, Workflow: "nobody", Input: []byte(`{}`)}})
	must(d.t, err)
	claim := func() storage.Lease {
		d.t.Helper()
		claimed, err := d.store.Claim(ctx, storage.ClaimRequest{Owner: "worker", Workflows: []string{"nobody"}, Limit: 1, LeaseFor: time.Hour})
		must(d.t, err)
		if len(claimed) != 1 || claimed[0].Lease.RunID != id {
			d.t.Fatalf("claim %s: %+v", id, claimed)
		}
		return claimed[0].Lease
	}
	l := claim()
	for _, cp := range cps {
		_, err := d.store.Checkpoint(ctx, storage.CheckpointRequest{Lease: l, LeaseFor: time.Hour, Checkpoint: cp})
		must(d.t, err)
	}
	later := time.Now().Add(time.Hour)
	if wait != nil {
		due := time.Now().Add(-time.Second)
		_, err := d.store.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, Wait: wait, ReadyAt: &due})
		must(d.t, err)
		l = claim()
	}
	_, err = d.store.Suspend(ctx, storage.SuspendRequest{Lease: l, LeaseFor: time.Hour, ReadyAt: &later, Hold: h})
	must(d.t, err)
}

// A held run's page says so next to its status and in a notice of its
// own: why, since when, at which call, the keys the run recorded and the
// code called, and what to do; every field escaped. The runs list marks
// held runs beside their status, with the reason as their detail.
func TestHeldRunShown(t *testing.T) {
	t.Parallel()
	d := newDash(t, false, nil)
	d.hold("order-7", []storage.Checkpoint{
		{Key: "ask@v1", Kind: storage.KindStep, Output: []byte(`"asked"`)},
		{Key: `approval"><b>bold`, Kind: storage.KindEvent, Output: []byte(`true`)},
	}, nil, &storage.Hold{
		Reason:   `the code calls audit@v1 <script>alert('hold')</script>, which the run did not record, where the run recorded approval`,
		Recorded: `approval"><b>bold`, Called: `audit@v1<script>alert('called')</script>`, Position: 1, Execution: 1, Since: holdSince,
	})
	d.hold("order-8", []storage.Checkpoint{{Key: "ask@v1", Kind: storage.KindStep, Output: []byte(`"asked"`)}},
		&storage.Wait{Key: "approved", Topic: "order.approved", Kind: storage.KindEvent},
		&storage.Hold{Reason: "the code returns without calling approved", Called: "", Position: 1, Execution: 1, Since: holdSince})
	_, err := d.store.CreateRuns(context.Background(), []storage.NewRun{{ID: "order-9", Workflow: "nobody", Input: []byte(`{}`)}})
	must(t, err)

	res := d.get("/"+runPath("order-7")).want(t, http.StatusOK)
	noScriptInjected(t, "a held run's page", res.body)
	res.contains(t,
		`<span id="status" class="status st-waiting">waiting</span> <span class="status st-held"`,
		`<section id="hold" class="callout held" role="status">`,
		`<p id="hold-reason">the code calls audit@v1 &lt;script&gt;alert(&#39;hold&#39;)&lt;/script&gt;, which the run did not record, where the run recorded approval</p>`,
		`<dt>Held since</dt><dd><time datetime="2026-03-14T09:26:53Z">2026-03-14 09:26:53Z</time></dd>`,
		`<dd>call 2 of execution 1</dd>`,
		`<dd id="hold-recorded"><code>approval&#34;&gt;&lt;b&gt;bold</code></dd>`,
		`<dd id="hold-called"><code>audit@v1&lt;script&gt;alert(&#39;called&#39;)&lt;/script&gt;</code></dd>`,
		`<dt>Next try</dt><dd><time`,
		`or from step <code>approval&#34;&gt;&lt;b&gt;bold</code>, which keeps the steps before it`,
		`data-action="terminate"`, `data-action="restart"`,
	).lacks(t, `<section id="sleep"`, "Wakes at")
	// The notice is in the run's head, by its status, before the steps.
	head := res.body[strings.Index(res.body, `<header class="run-head">`):]
	if head = head[:strings.Index(head, `</header>`)]; !strings.Contains(head, `<section id="hold"`) {
		t.Errorf("the hold notice is not in the run's head:\n%s", res.body)
	}

	// Held where its history ends, while it waits: said in words, the
	// wait kept, its ready time not taken for a timeout, and no restart
	// from a step the run did not record.
	res = d.get("/"+runPath("order-8")).want(t, http.StatusOK)
	res.contains(t, `<section id="hold" class="callout held" role="status">`, `<dd id="hold-called">nothing: it returns there</dd>`,
		`<dd id="hold-recorded">nothing: its history ends there</dd>`,
		`<section id="wait" class="callout">`, `<code class="topic">order.approved</code>`, "An event sent to it now is kept for it.").
		lacks(t, "Times out at", "or from step")

	res = d.get("/"+runPath("order-9")).want(t, http.StatusOK)
	res.lacks(t, `id="hold"`, "st-held")

	runs := d.get("/runs").want(t, http.StatusOK)
	noScriptInjected(t, "the runs page with a held run", runs.body)
	rows := map[string]string{}
	for _, id := range []string{"order-7", "order-8", "order-9"} {
		i := strings.Index(runs.body, `<tr data-run-id="`+id+`"`)
		if i < 0 {
			t.Fatalf("the runs page lacks %s:\n%s", id, runs.body)
		}
		rows[id] = runs.body[i : i+strings.Index(runs.body[i:], "</tr>")]
	}
	for _, want := range []string{
		`<span class="status st-waiting">waiting</span> <span class="status st-held"`,
		`<td class="detail">held: the code calls audit@v1 &lt;script&gt;alert(&#39;hold&#39;)&lt;/script&gt;, which the run did not record`,
	} {
		if !strings.Contains(rows["order-7"], want) {
			t.Errorf("the held run's row lacks %q:\n%s", want, rows["order-7"])
		}
	}
	if !strings.Contains(rows["order-8"], "st-held") || strings.Contains(rows["order-9"], "st-held") {
		t.Errorf("held runs' rows: %s\n%s", rows["order-8"], rows["order-9"])
	}
}
