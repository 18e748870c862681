package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stemflow/stem/storage"
)

// fixedClock is a clock the test sets, so runs are created at known
// times.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// epoch is when the first of the listed runs is created.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// listed seeds 120 runs r-000 to r-119, created a minute apart from epoch:
// the even ones of workflow alpha, the odd ones of beta; every third on
// queue slow; r-0X0 paused and r-0X5 terminated, the rest queued.
func listed(t *testing.T, open func(*testing.T, bool, storage.Clock) *dash) *dash {
	t.Helper()
	clock := &fixedClock{t: epoch}
	d := open(t, false, clock)
	ctx := context.Background()
	for i := range 120 {
		clock.set(epoch.Add(time.Duration(i) * time.Minute))
		r := storage.NewRun{ID: fmt.Sprintf("r-%03d", i), Workflow: "beta", Input: []byte(`{}`)}
		if i%2 == 0 {
			r.Workflow = "alpha"
		}
		if i%3 == 0 {
			r.Queue = "slow"
		}
		_, err := d.store.CreateRuns(ctx, []storage.NewRun{r})
		must(t, err)
		switch i % 10 {
		case 0:
			must(t, d.e.Pause(ctx, r.ID))
		case 5:
			must(t, d.e.Terminate(ctx, r.ID, "test"))
		}
	}
	clock.set(epoch.Add(3 * time.Hour))
	return d
}

var (
	runRow   = regexp.MustCompile(`<tr data-run-id="([^"]*)" data-status="([^"]*)"[^>]*>`)
	nextLink = regexp.MustCompile(`<a id="next" href="([^"]*)"`)
)

// rowsOf returns the IDs the runs table lists, in order, checking each
// row's status against the run's.
func (d *dash) rowsOf(res *response) []string {
	d.t.Helper()
	var ids []string
	for _, m := range runRow.FindAllStringSubmatch(res.body, -1) {
		id := unescape(m[1])
		if st := d.status(id); string(st) != m[2] {
			d.t.Errorf("row %s says %s, the run is %s", id, m[2], st)
		}
		ids = append(ids, id)
	}
	return ids
}

// unescape undoes html/template's escaping of the test's plain IDs.
func unescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

// next returns the next page's URL, "" when the page has no a#next.
func next(t *testing.T, from string, res *response) string {
	m := nextLink.FindStringSubmatch(res.body)
	if m == nil {
		return ""
	}
	return resolve(t, from, unescape(m[1]))
}

// countOf returns the count the page shows for a status ("" for all).
func countOf(t *testing.T, res *response, status string) int {
	t.Helper()
	re := regexp.MustCompile(`<a data-status="` + status + `"[^>]*>[^<]*<span class="count">(\d+)</span></a>`)
	m := re.FindStringSubmatch(res.body)
	if m == nil {
		t.Fatalf("no count for status %q in\n%s", status, res.body)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func ids(from, to int) []string {
	var out []string
	for i := from; i != to; {
		out = append(out, fmt.Sprintf("r-%03d", i))
		if from < to {
			i++
		} else {
			i--
		}
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s: listed %v, want %v", what, got, want)
	}
}

// The runs page lists newest first, a page at a time through the cursor,
// keeping the filter on every page, with the counts of the workflow.
func TestRunsPagesThroughTheCursor(t *testing.T) {
	t.Parallel()
	d := listed(t, newDash)
	var all []string
	target := "/runs"
	for pages := 0; target != ""; pages++ {
		if pages > 3 {
			t.Fatal("more pages than 120 runs make")
		}
		res := d.get(target).want(t, http.StatusOK)
		res.contains(t, `<a id="first" href="./runs">`)
		all = append(all, d.rowsOf(res)...)
		target = next(t, target, res)
	}
	sameIDs(t, "every page", all, ids(119, -1))

	res := d.get("/runs").want(t, http.StatusOK)
	for status, want := range map[string]int{"": 120, "queued": 96, "paused": 12, "terminated": 12, "complete": 0} {
		if n := countOf(t, res, status); n != want {
			t.Errorf("count of %q: %d, want %d", status, n, want)
		}
	}

	// The filter and the order stay on every page.
	target = "/runs?workflow=alpha&order=oldest"
	all = nil
	for target != "" {
		res := d.get(target).want(t, http.StatusOK)
		if n := countOf(t, res, ""); n != 60 {
			t.Errorf("%s: all counts %d, want alpha's 60", target, n)
		}
		all = append(all, d.rowsOf(res)...)
		if nx := next(t, target, res); nx != "" && (!strings.Contains(nx, "workflow=alpha") || !strings.Contains(nx, "order=oldest")) {
			t.Errorf("next page %q lost the filter", nx)
		}
		target = next(t, target, res)
	}
	var want []string
	for i := 0; i < 120; i += 2 {
		want = append(want, fmt.Sprintf("r-%03d", i))
	}
	sameIDs(t, "alpha, oldest first", all, want)
}

// Each filter lists what it says, and says nothing matches in words, on
// the memstore and on SQLite, the default store.
func TestRunsFilters(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T, bool, storage.Clock) *dash{"memstore": newDash, "sqlite": newSQLiteDash} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runsFilters(t, listed(t, open))
		})
	}
}

func runsFilters(t *testing.T, d *dash) {
	at := func(m int) string {
		return url.QueryEscape(epoch.Add(time.Duration(m) * time.Minute).Format("2006-01-02T15:04"))
	}
	cases := []struct {
		query string
		want  []string
	}{
		{"status=paused", []string{"r-110", "r-100", "r-090", "r-080", "r-070", "r-060", "r-050", "r-040", "r-030", "r-020", "r-010", "r-000"}},
		{"status=TERMINATED&prefix=r-0", []string{"r-095", "r-085", "r-075", "r-065", "r-055", "r-045", "r-035", "r-025", "r-015", "r-005"}},
		{"prefix=r-01", ids(19, 9)},
		{"prefix=r-01&order=oldest", ids(10, 20)},
		{"queue=slow&prefix=r-0", []string{"r-099", "r-096", "r-093", "r-090", "r-087", "r-084", "r-081", "r-078", "r-075", "r-072", "r-069", "r-066", "r-063", "r-060", "r-057", "r-054", "r-051", "r-048", "r-045", "r-042", "r-039", "r-036", "r-033", "r-030", "r-027", "r-024", "r-021", "r-018", "r-015", "r-012", "r-009", "r-006", "r-003", "r-000"}},
		{"from=" + at(10) + "&to=" + at(20), ids(19, 9)},
		{"from=" + url.QueryEscape("2025-01-01T01:50:00+01:00") + "&order=oldest&workflow=beta", []string{"r-051", "r-053", "r-055", "r-057", "r-059", "r-061", "r-063", "r-065", "r-067", "r-069",
			"r-071", "r-073", "r-075", "r-077", "r-079", "r-081", "r-083", "r-085", "r-087", "r-089", "r-091", "r-093", "r-095", "r-097", "r-099", "r-101", "r-103", "r-105", "r-107", "r-109", "r-111", "r-113", "r-115", "r-117", "r-119"}},
		{"to=2025-01-01&order=oldest", nil},
		{"to=" + at(3) + ":00.5", ids(3, -1)},
	}
	for _, c := range cases {
		res := d.get("/runs?"+c.query).want(t, http.StatusOK)
		sameIDs(t, c.query, d.rowsOf(res), c.want)
		if len(c.want) == 0 {
			res.contains(t, `<p id="no-runs" class="empty">No runs match. Runs started by other runs are not listed: <a id="show-children" href="./runs?children=1&amp;`)
		}
	}
	// The form shows the filter again, times in UTC.
	res := d.get("/runs?workflow=beta&status=paused&queue=slow&prefix=r-&from=" + url.QueryEscape("2025-01-01T01:50:00+01:00") + "&order=oldest")
	res.contains(t, `<option selected>beta</option>`, `<option selected>paused</option>`, `name="queue" value="slow"`,
		`name="prefix" value="r-"`, `name="from" value="2025-01-01T00:50"`, `<option value="oldest" selected>`)
}

// A filter the dashboard cannot read is a 400 that says why, with the
// form to fix it; nothing is listed.
func TestRunsFilterInWords(t *testing.T) {
	t.Parallel()
	d := listed(t, newDash)
	for query, words := range map[string]string{
		"status=sleepy":                        "unknown status &#34;sleepy&#34;: a run is queued, running, paused, waiting, complete, errored, terminated",
		"from=yesterday":                       "&#34;yesterday&#34; in from is not a time",
		"to=2025-13-01T00:00":                  "in to is not a time",
		"order=sideways":                       "unknown order &#34;sideways&#34;",
		"from=2025-01-02&to=2025-01-01":        "the time range ends (2025-01-01 00:00:00Z) at or before it begins (2025-01-02 00:00:00Z)",
		"workflow=" + url.QueryEscape("a\x00"): "workflow filter",
	} {
		res := d.get("/runs?"+query).want(t, http.StatusBadRequest)
		res.contains(t, `<p id="filter-error" class="error" role="alert">`, words, `<form id="filters"`).lacks(t, `<table id="runs"`, "data-refresh")
	}
}
