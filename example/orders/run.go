package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/stemflow/stem/example/orders/orders"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/schedule"
	"github.com/stemflow/stem/stores/storeurl"
)

// tracesFile is where --otel writes the traces when no OTLP endpoint is
// configured, in the working directory.
const tracesFile = "traces.json"

// needsOTel ends the help of the flags that only a build with -tags otel
// has.
func needsOTel() string {
	if telemetryBuilt {
		return ""
	}
	return " (needs a build with -tags otel)"
}

// run is the whole program; main only wires signals and the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeURL := fs.String("store", "stem.db", "where runs are kept: a SQLite path, postgres://… or redis://…")
	count := fs.Int("orders", 100, "how many orders to fulfil")
	workers := fs.Int("workers", 16, "how many runs this process executes at once")
	coolOff := fs.Duration("cool-off", 3*time.Second, "each order's cool-off sleep")
	truck := fs.Duration("truck", time.Second, "how often the warehouse's truck collects waiting orders")
	cancelID := fs.String("cancel", "", "cancel the order of this `ID` (order-0042, say) while it cools off, through its Cancel update, and print the run's reply")
	plain := fs.Bool("plain", false, "print plain progress lines even on a terminal")
	traces := fs.Bool("otel", false, "trace the orders with OpenTelemetry: to the OTLP/HTTP endpoint OTEL_EXPORTER_OTLP_ENDPOINT names, or else to "+tracesFile+needsOTel())
	metrics := fs.String("metrics", "", "serve OpenTelemetry metrics for Prometheus at http://`ADDR`/metrics (:9464, say), and keep serving them once the orders are done"+needsOTel())
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *count < 1 || *workers < 1 {
		fmt.Fprintln(stderr, "orders: --orders and --workers must be at least 1")
		return 2
	}
	tel, err := newTelemetry(ctx, *traces, *metrics, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "orders:", err)
		return 2
	}
	err = fulfil(ctx, config{
		store: *storeURL, orders: *count, workers: *workers, coolOff: *coolOff, truck: *truck, cancel: *cancelID,
		out: stdout, warnings: stderr, terminal: !*plain && isTerminal(stdout), telemetry: tel,
	})
	if terr := tel.shutdown(ctx); terr != nil {
		fmt.Fprintln(stderr, "orders:", terr)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return 130
		}
		fmt.Fprintln(stderr, "orders:", err)
		return 1
	}
	return 0
}

type config struct {
	store   string
	orders  int
	workers int
	coolOff time.Duration
	truck   time.Duration
	// cancel is the ID of an order to cancel (--cancel), or "".
	cancel   string
	out      io.Writer
	warnings io.Writer // the store's warnings about the server's settings
	terminal bool
	// telemetry traces and measures the engine (--otel, --metrics); nil:
	// neither.
	telemetry *telemetry
}

func fulfil(ctx context.Context, cfg config) error {
	// A worker says once, when it opens the store, what the server's settings
	// mean for durability (Redis without an append-only file, say).
	store, err := storeurl.OpenWith(ctx, cfg.store, storeurl.Options{
		Logger: slog.New(slog.NewTextHandler(cmpOr(cfg.warnings, io.Discard), nil)),
	})
	if err != nil {
		return err
	}
	defer store.Close()

	// The payment provider the Charge step calls: it fails some requests and
	// loses some answers, and deduplicates by idempotency key.
	payments := orders.NewPaymentService(1, 1)
	srv := httptest.NewServer(payments)
	defer srv.Close()

	engine, err := runtime.New(runtime.Config{
		Store:         store,
		Workers:       cfg.workers,
		LeaseDuration: 5 * time.Second, // a killed run of this demo is picked up again within 5s
		PollInterval:  200 * time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
		// Fire the store's schedules (stem schedule create ...) while it works.
		Services: []runtime.Service{schedule.Service{}},
		Hooks:    cfg.telemetry.hooks(),
	})
	if err != nil {
		return err
	}
	defer engine.Close()
	stopObserving, err := cfg.telemetry.observe(engine)
	if err != nil {
		return err
	}
	defer stopObserving()
	if err := engine.RegisterQueue(orders.FulfilQueue); err != nil {
		return err
	}
	steps := orders.NewSteps(orders.NewPaymentsClient(srv.URL, srv.Client()))
	if err := orders.RegisterWorkflows(engine, steps); err != nil {
		return err
	}

	// Start every order under a fixed ID: an order started by an earlier,
	// interrupted session is found, not started again.
	items := make([]runtime.BatchItem[orders.Order], cfg.orders)
	for i := range items {
		id := fmt.Sprintf("order-%04d", i+1)
		o := sampleOrder(id, i, cfg.coolOff)
		// Each customer's orders are a partition of the orders queue.
		items[i] = runtime.BatchItem[orders.Order]{ID: id, Input: o, Partition: o.Customer}
	}
	before, _, err := countStatuses(ctx, engine)
	if err != nil {
		return err
	}
	runs, err := startOrders(ctx, engine, items, cfg.telemetry)
	if err != nil {
		return err
	}
	if resumed := before.total() - before[runtime.StatusComplete] - before[runtime.StatusErrored] - before[runtime.StatusTerminated]; before.total() > 0 {
		fmt.Fprintf(cfg.out, "found %d orders from an earlier session in %s: %d finished, resuming %d\n",
			before.total(), cfg.store, before.total()-resumed, resumed)
	} else {
		fmt.Fprintf(cfg.out, "started %d orders in %s\n", len(runs), cfg.store)
	}

	began := time.Now()
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	workDone := make(chan error, 1)
	go func() { workDone <- engine.Run(work) }()
	go warehouse(work, engine, cfg.truck)
	if cfg.cancel != "" {
		cancelOrder(ctx, engine, cfg.cancel, cfg.out)
	}

	prog := &progress{out: cfg.out, terminal: cfg.terminal, total: len(runs)}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var (
		counts statusCounts
		stages stageCounts
	)
	interrupted := false
	for {
		counts, stages, err = countStatuses(ctx, engine)
		if err != nil && ctx.Err() == nil {
			stopWork()
			<-workDone
			return err
		}
		if err == nil {
			prog.show(counts, stages, time.Since(began))
		}
		if counts.finished() >= len(runs) {
			break
		}
		select {
		case <-ctx.Done():
			interrupted = true
		case err := <-workDone:
			// The engine stopped by itself: a store it cannot work on
			// (one that lacks the queue's limits, say) or a closed store.
			prog.done()
			stopWork()
			return fmt.Errorf("working the orders: %w", err)
		case <-tick.C:
		}
		if interrupted {
			break
		}
	}
	prog.done()
	// Stop working: runs in flight are handed back, ready for the next session.
	stopWork()
	<-workDone
	if interrupted {
		counts, _, _ = countStatuses(context.Background(), engine)
		fmt.Fprintf(cfg.out, "interrupted: %d of %d orders finished; run again to resume the rest\n", counts.finished(), len(runs))
		return ctx.Err()
	}
	err = summary(context.Background(), cfg.out, cfg.store, runs, counts, payments, time.Since(began))
	printLog(context.Background(), engine, runs[0].ID(), cfg.out)
	if addr, ok := cfg.telemetry.serving(); ok {
		// Keep the final counts up for a scrape (or a curl) to read.
		fmt.Fprintf(cfg.out, "metrics on http://%s/metrics; Ctrl-C to stop\n", addr)
		<-ctx.Done()
	}
	return err
}

// startOrders starts the orders in one batch; when tracing, one at a time
// instead, each under a root span of its own, "order <id>", so each
// order's run is a trace.
func startOrders(ctx context.Context, e *runtime.Engine, items []runtime.BatchItem[orders.Order], tel *telemetry) ([]*orders.FulfilRun, error) {
	if !tel.tracing() {
		return orders.StartFulfilBatch(ctx, e, items)
	}
	runs := make([]*orders.FulfilRun, len(items))
	for i, it := range items {
		octx, end := tel.startSpan(ctx, "order "+it.ID)
		r, err := orders.StartFulfil(octx, e, it.Input, runtime.WithID(it.ID), runtime.WithPartition(it.Partition))
		end()
		if err != nil {
			return nil, err
		}
		runs[i] = r
	}
	return runs, nil
}

// warehouse is the simulated warehouse: every interval its truck collects
// the orders waiting for it (an Emit of the typed event).
func warehouse(ctx context.Context, e *runtime.Engine, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, _ = orders.Warehouse{Engine: e}.ShipAll(ctx, fmt.Sprintf("TRUCK-%03d", n))
	}
}

// cancelOrder sends order id's run the Cancel update and says what it
// replied. The update's ID is fixed, so a session run again finds the
// first one's update and reply rather than cancelling twice.
func cancelOrder(ctx context.Context, e *runtime.Engine, id string, out io.Writer) {
	got, err := orders.UpdateCancel(ctx, e, id, orders.Cancel{Reason: "the customer changed their mind"}, runtime.WithUpdateID("cancel-"+id))
	switch {
	case err == nil:
		fmt.Fprintf(out, "cancelled %s: its stock hold %s is released\n", id, got.Released)
	case errors.Is(err, runtime.ErrUpdateRunEnded), errors.Is(err, runtime.ErrUpdateUnhandled):
		fmt.Fprintf(out, "%s was past its cool-off, so it was not cancelled\n", id)
	default:
		fmt.Fprintf(out, "cancel %s: %v\n", id, err)
	}
}

// printLog prints the log stream of run id as the run wrote it.
func printLog(ctx context.Context, e *runtime.Engine, id string, out io.Writer) {
	fmt.Fprintf(out, "  the log %s wrote (stem stream %s %s):\n", id, id, orders.LogLineStream)
	for line, err := range orders.StreamLogLine(ctx, e, id, 0) {
		if err != nil {
			fmt.Fprintf(out, "    (%v)\n", err)
			return
		}
		fmt.Fprintf(out, "    %3d  %s\n", line.Offset, line.Value.Text)
	}
}

func sampleOrder(id string, i int, coolOff time.Duration) orders.Order {
	skus := []string{"kettle", "teapot", "mug", "strainer", "tin"}
	o := orders.Order{ID: id, Customer: fmt.Sprintf("customer-%d", i%7), CoolOff: coolOff, ShipWithin: time.Hour}
	for j := 0; j <= i%3; j++ {
		o.Items = append(o.Items, orders.Item{SKU: skus[(i+j)%len(skus)], Qty: 1 + j, PriceCents: int64(500 + 250*((i+j)%4))})
	}
	return o
}

type statusCounts map[runtime.RunStatus]int

func (c statusCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c statusCounts) finished() int {
	return c[runtime.StatusComplete] + c[runtime.StatusErrored] + c[runtime.StatusTerminated]
}

// stageCounts counts unfinished order runs by the stage their published
// progress names.
type stageCounts map[string]int

// stageOrder is the order of Fulfil's stages, as the progress line lists
// them.
var stageOrder = []string{orders.StageReserving, orders.StageCoolingOff, orders.StageAwaitingShipment,
	orders.StagePacking, orders.StageCharging, orders.StageInvoicing}

// heldStage counts, among the stages, the runs an engine held because
// this build's code no longer makes the calls they recorded.
const heldStage = "held"

func (s stageCounts) String() string {
	var parts []string
	for _, st := range stageOrder {
		if n := s[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	if n := s[heldStage]; n > 0 {
		parts = append(parts, fmt.Sprintf("held %d: this build's code no longer makes the calls they recorded (go run ./cmd/stem runs --held)", n))
	}
	return strings.Join(parts, ", ")
}

// countStatuses counts the order runs by status, and the unfinished ones
// by the stage of the progress they published (orders.FulfilProgress).
func countStatuses(ctx context.Context, e *runtime.Engine) (statusCounts, stageCounts, error) {
	counts, stages := statusCounts{}, stageCounts{}
	after := ""
	for {
		page, next, err := e.ListRuns(ctx, runtime.ListRunsQuery{Workflow: orders.FulfilWorkflowName, After: after, Limit: 1000})
		if err != nil {
			return nil, nil, err
		}
		for _, r := range page {
			counts[r.Status]++
			if r.Hold != nil && !r.Status.Finished() {
				stages[heldStage]++
				continue
			}
			var p orders.FulfilProgress
			if !r.Status.Finished() && r.Progress != nil && json.Unmarshal(r.Progress, &p) == nil {
				stages[p.Stage]++
			}
		}
		if next == "" {
			return counts, stages, nil
		}
		after = next
	}
}

// progress prints the runs' advance: one line redrawn in place on a
// terminal, a plain line per change otherwise.
type progress struct {
	out      io.Writer
	terminal bool
	total    int
	last     string
}

func (p *progress) show(c statusCounts, stages stageCounts, elapsed time.Duration) {
	done := c.finished()
	line := fmt.Sprintf("%d/%d done  (queued %d, running %d, waiting %d, paused %d, errored %d)",
		done, p.total, c[runtime.StatusQueued], c[runtime.StatusRunning], c[runtime.StatusWaiting],
		c[runtime.StatusPaused], c[runtime.StatusErrored])
	if s := stages.String(); s != "" && !p.terminal {
		line += "  " + s
	}
	if line == p.last {
		return
	}
	p.last = line
	if !p.terminal {
		fmt.Fprintf(p.out, "%6.1fs  %s\n", elapsed.Seconds(), line)
		return
	}
	const width = 30
	filled := width * done / max(p.total, 1)
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	fmt.Fprintf(p.out, "\r\033[K%s %s  %5.1fs", bar, line, elapsed.Seconds())
}

func (p *progress) done() {
	if p.terminal && p.last != "" {
		fmt.Fprintln(p.out)
	}
}

func summary(ctx context.Context, out io.Writer, store string, runs []*orders.FulfilRun, c statusCounts, payments *orders.PaymentService, elapsed time.Duration) error {
	var revenue, shipping int64
	var parcels int
	var failed []string
	cancelled := 0
	for _, r := range runs {
		receipt, err := r.Result(ctx)
		if errors.Is(err, orders.ErrCancelled) {
			cancelled++
			continue
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", r.ID(), err))
			continue
		}
		revenue += receipt.Payment.AmountCents
		shipping += receipt.Shipping.CostCents
		parcels += len(receipt.Parcels)
	}
	fmt.Fprintf(out, "\nsummary: %d orders complete, %d errored, %d terminated in %.1fs\n",
		c[runtime.StatusComplete], c[runtime.StatusErrored]-cancelled, c[runtime.StatusTerminated], elapsed.Seconds())
	if cancelled > 0 {
		fmt.Fprintf(out, "  %d cancelled by the customer in their cool-off\n", cancelled)
	}
	fmt.Fprintf(out, "  charged %d.%02d in %d payments (%d requests to the payment service, retries deduplicated by idempotency key)\n",
		revenue/100, revenue%100, len(payments.Payments()), payments.Requests())
	fmt.Fprintf(out, "  packed %d parcels, shipping quoted at %d.%02d\n", parcels, shipping/100, shipping%100)
	for _, f := range failed {
		fmt.Fprintf(out, "  failed %s\n", f)
	}
	storeFlag := ""
	if store != "stem.db" {
		storeFlag = " --store '" + store + "'"
	}
	fmt.Fprintf(out, "  inspect a run: go run ./cmd/stem%s show %s\n", storeFlag, runs[0].ID())
	if len(failed) > 0 {
		return fmt.Errorf("%d orders failed", len(failed))
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// cmpOr returns w, or def when w is nil.
func cmpOr(w, def io.Writer) io.Writer {
	if w == nil {
		return def
	}
	return w
}
