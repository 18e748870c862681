//go:build otel

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is output the program writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until re matches the output, and returns the match's
// groups.
func (b *syncBuffer) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(b.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output within %v:\n%s", re, within, b)
		}
	}
}

// scrape reads the metrics at url and returns every sample, by metric
// name (histograms as their _count, _sum and _bucket series), each with
// its labels as written.
func scrape(t *testing.T, url string) map[string][]sample {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string][]sample{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unexpected line in the metrics: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("value of %q: %v", line, err)
		}
		out[m[1]] = append(out[m[1]], sample{labels: m[2], value: v})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)

type sample struct {
	labels string
	value  float64
}

// total sums a metric's samples whose labels contain every one of with.
func total(samples []sample, with ...string) float64 {
	var sum float64
	for _, s := range samples {
		if !slices.ContainsFunc(with, func(w string) bool { return !strings.Contains(s.labels, w) }) {
			sum += s.value
		}
	}
	return sum
}

// With --metrics, the program serves its metrics for Prometheus while the
// orders run (the queue gauges count the orders waiting) and, once they
// are done, until it is stopped (the counters and histograms count what
// the orders did).
func TestMetricsServed(t *testing.T) {
	db := filepath.Join(t.TempDir(), "stem.db")
	args := []string{"--store", db, "--orders", "8", "--cool-off", "500ms", "--truck", "100ms", "--plain", "--metrics", "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, args, &out, &errOut) }()

	url := "http://" + errOut.waitFor(t, regexp.MustCompile(`orders: metrics on http://(\S+)/metrics\n`), 10*time.Second)[1] + "/metrics"
	// While the orders cool off, the queue gauges count them.
	lingering := regexp.MustCompile(`metrics on http://\S+/metrics; Ctrl-C to stop\n`)
	waiting := 0.0
	for waiting == 0 && !lingering.MatchString(out.String()) {
		waiting = total(scrape(t, url)["stem_queue_waiting"], `stem_queue="orders"`)
		time.Sleep(10 * time.Millisecond)
	}
	if waiting == 0 {
		t.Errorf("stem_queue_waiting never counted an order waiting")
	}
	out.waitFor(t, lingering, 30*time.Second)
	if !strings.Contains(out.String(), "summary: 8 orders complete, 0 errored") {
		t.Fatalf("output:\n%s\n%s", out.String(), errOut.String())
	}

	m := scrape(t, url)
	var names []string
	for name := range m {
		if strings.HasPrefix(name, "stem_") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	t.Logf("metrics: %s", strings.Join(names, " "))
	fulfil := `stem_workflow="orders.fulfil"`
	for _, c := range []struct {
		name string
		with []string
		min  float64
	}{
		{"stem_runs_started_total", []string{fulfil}, 8},
		{"stem_runs_finished_total", []string{fulfil, `stem_status="complete"`}, 8},
		{"stem_executions_total", []string{fulfil, `stem_outcome="complete"`}, 8},
		{"stem_executions_total", []string{fulfil, `stem_outcome="parked"`}, 8},
		{"stem_step_duration_seconds_count", []string{fulfil, `stem_step="reserve@v1"`, `stem_outcome="ok"`}, 8},
		{"stem_step_duration_seconds_count", []string{fulfil, `stem_step="charge@v1"`, `stem_outcome="retry"`}, 1},
		{"stem_step_duration_seconds_sum", []string{fulfil}, 1e-9},
		{"stem_step_retries_total", []string{fulfil, `stem_step="charge@v1"`}, 1},
		{"stem_store_duration_seconds_count", []string{`stem_store_op="Checkpoint"`, `stem_outcome="ok"`}, 8},
		{"stem_store_duration_seconds_count", []string{`stem_store_op="QueueStats"`}, 1},
		{"stem_claim_duration_seconds_count", []string{`stem_outcome="ok"`}, 1},
		{"stem_claim_duration_seconds_sum", nil, 1e-9},
	} {
		if got := total(m[c.name], c.with...); got < c.min {
			t.Errorf("%s%v = %v, want at least %v; samples %v", c.name, c.with, got, c.min, m[c.name])
		}
	}
	// Nothing is left in the queue, and the gauges say so.
	for _, name := range []string{"stem_queue_ready", "stem_queue_oldest_ready_seconds", "stem_queue_running", "stem_queue_waiting"} {
		if len(m[name]) == 0 || total(m[name], `stem_queue="orders"`) != 0 {
			t.Errorf("%s: %v, want 0 for queue orders", name, m[name])
		}
	}
	// No lease was lost: a counter never added to has no series.
	if s := m["stem_lease_lost_total"]; len(s) != 0 {
		t.Errorf("stem_lease_lost_total %v", s)
	}

	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("exit %d after lingering\n%s%s", code, out.String(), errOut.String())
	}
	if _, err := http.Get(url); err == nil {
		t.Error("the metrics are still served after the program returned")
	}
}

func TestMetricsBadAddress(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--metrics", "nonsense", "--store", filepath.Join(t.TempDir(), "stem.db")}, &out, &errOut); code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, errOut.String())
	}
	if !strings.HasPrefix(errOut.String(), "orders: --metrics nonsense: ") {
		t.Fatalf("stderr: %q", errOut.String())
	}
}

// jsonSpan is a span as the stdout exporter writes it.
type jsonSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	StartTime   time.Time
	EndTime     time.Time
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
	Status struct{ Code string }
	Events []struct {
		Name       string
		Attributes []struct {
			Key   string
			Value struct{ Value any }
		}
	}
}

func (s *jsonSpan) attr(key string) any {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Value
		}
	}
	return nil
}

// readSpans reads the spans of traces.json.
func readSpans(t *testing.T, path string) []*jsonSpan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var spans []*jsonSpan
	dec := json.NewDecoder(f)
	for {
		s := new(jsonSpan)
		if err := dec.Decode(s); errors.Is(err, io.EOF) {
			return spans
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		spans = append(spans, s)
	}
}

// With --otel and no OTLP endpoint, the traces go to traces.json: each
// order is a trace, its root the span "order <id>", holding its start,
// every execution of its run, their steps and its child run's. The test
// logs the first order's trace as a tree (go test -v -run
// TestTraceOfAnOrder).
func TestTraceOfAnOrder(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	dir := t.TempDir()
	t.Chdir(dir)
	var out, errOut bytes.Buffer
	args := []string{"--store", "stem.db", "--orders", "3", "--cool-off", "200ms", "--truck", "100ms", "--plain", "--otel"}
	if code := run(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "orders: writing traces to traces.json") {
		t.Errorf("stderr does not say where the traces go:\n%s", errOut.String())
	}
	spans := readSpans(t, filepath.Join(dir, "traces.json"))

	roots := map[string]*jsonSpan{} // by order ID
	for _, s := range spans {
		if id, ok := strings.CutPrefix(s.Name, "order "); ok {
			roots[id] = s
		}
	}
	if len(roots) != 3 {
		t.Fatalf("%d order spans, want 3", len(roots))
	}
	for id, root := range roots {
		if root.Parent.SpanID != "0000000000000000" {
			t.Errorf("the span of order %s has a parent", id)
		}
		// Every span of the order's runs (its own and its child's) is
		// in its trace, and each of its runs executed there.
		executed := map[string]bool{}
		for _, s := range spans {
			run, _ := s.attr("stem.run_id").(string)
			if run != id && !strings.HasPrefix(run, id+"/") {
				continue
			}
			if s.SpanContext.TraceID != root.SpanContext.TraceID {
				t.Errorf("span %s of run %s is in trace %s, not its order's %s", s.Name, run, s.SpanContext.TraceID, root.SpanContext.TraceID)
			}
			if strings.HasPrefix(s.Name, "stem.execute ") {
				executed[s.Name] = true
			}
		}
		if !executed["stem.execute orders.fulfil"] || !executed["stem.execute orders.invoice"] {
			t.Errorf("order %s: executions %v, want the order's and its invoice's", id, executed)
		}
	}

	tree := traceTree(spans, roots["order-0001"])
	t.Logf("the trace of order-0001:\n%s", tree)
	for _, want := range []string{"stem.start orders.fulfil", "stem.execute orders.fulfil", "stem.step reserve@v1", "stem.start orders.invoice", "stem.execute orders.invoice", "stem.wait(cool-off-or-cancel"} {
		if !strings.Contains(tree, want) {
			t.Errorf("the trace has no %s", want)
		}
	}
}

// traceAttrs are the attributes the tree shows, in order, with the
// label each goes by.
var traceAttrs = []struct{ key, label string }{
	{"stem.run_id", "run"},
	{"stem.recoveries", "recoveries"},
	{"stem.outcome", "outcome"},
	{"stem.step.attempt", "attempt"},
	{"stem.step.async", "async"},
	{"stem.step.retry", "retry"},
}

// traceTree draws the trace under root: each span with when it began
// after the root, how long it took, and its key attributes and events;
// children in the order they began.
func traceTree(spans []*jsonSpan, root *jsonSpan) string {
	var b strings.Builder
	var draw func(s *jsonSpan, prefix, branch string)
	draw = func(s *jsonSpan, prefix, branch string) {
		var notes []string
		for _, a := range traceAttrs {
			if v := s.attr(a.key); v != nil && v != false && !(a.key == "stem.recoveries" && v == 0.0) {
				notes = append(notes, fmt.Sprintf("%s=%v", a.label, v))
			}
		}
		if s.Status.Code == "Error" {
			notes = append(notes, "ERROR")
		}
		for _, ev := range s.Events {
			for _, a := range ev.Attributes {
				if a.Key == "stem.step.key" {
					notes = append(notes, fmt.Sprintf("%s(%v)", ev.Name, a.Value.Value))
				}
			}
		}
		fmt.Fprintf(&b, "%s%-*s %9s %8s  %s\n", prefix+branch, 52-len([]rune(prefix+branch)), s.Name,
			"+"+ms(s.StartTime.Sub(root.StartTime)), ms(s.EndTime.Sub(s.StartTime)), strings.Join(notes, " "))
		var children []*jsonSpan
		for _, c := range spans {
			if c.Parent.SpanID == s.SpanContext.SpanID && c.SpanContext.TraceID == s.SpanContext.TraceID {
				children = append(children, c)
			}
		}
		slices.SortFunc(children, func(a, b *jsonSpan) int { return a.StartTime.Compare(b.StartTime) })
		next := prefix
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		for i, c := range children {
			if i == len(children)-1 {
				draw(c, next, "└─ ")
			} else {
				draw(c, next, "├─ ")
			}
		}
	}
	draw(root, "", "")
	return b.String()
}

// ms formats d in milliseconds, to a tenth, or a hundredth below 1ms.
func ms(d time.Duration) string {
	prec := 1
	if d < time.Millisecond {
		prec = 2
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', prec, 64) + "ms"
}
