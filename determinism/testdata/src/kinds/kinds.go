// Package kinds has a workflow with every kind of nondeterminism, in its
// body and in the functions it calls.
package kinds

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"fmt"
	"io"
	"maps"
	"math/rand"
	randv2 "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"clocks"

	"github.com/google/uuid"

	"github.com/stemflow/stem/runtime"
)

// Order is the workflow's input.
type Order struct {
	ID    string
	Items map[string]int
	Names []string
}

var (
	processed int
	lastOrder string
	cache     = map[string]int{}
	mu        sync.Mutex
	stats     struct{ count int }
)

// Steps holds the steps.
type Steps struct{}

// Pack packs a line.
//
//stem:step name=pack
func (s *Steps) Pack(ctx runtime.StepContext, sku string, qty int) (string, error) {
	return fmt.Sprint(time.Now()), nil
}

// Fulfil has one of every kind.
//
//stem:workflow name=kinds.fulfil
func Fulfil(ctx *FulfilContext, order Order) (string, error) {
	start := time.Now()           // want `^time.Now in workflow kinds.fulfil: a replay reads another time than the run did; use the context's Now \(ctx.Now\(\)\), which records the time at the call, or wait with the context's Sleep/SleepUntil$`
	_ = time.Since(start)         // want `^time.Since in workflow kinds.fulfil: a replay reads another time`
	_ = time.Until(start)         // want `^time.Until in workflow kinds.fulfil`
	time.Sleep(time.Second)       // want `^time.Sleep in workflow kinds.fulfil: the wait is not recorded, so it holds the worker and a replay waits again; use the context's Sleep or SleepUntil, which suspend the run durably$`
	_ = time.After(time.Second)   // want `^time.After in workflow kinds.fulfil: the timer is not recorded`
	_ = time.Tick(time.Second)    // want `^time.Tick in workflow`
	_ = time.NewTimer(time.Hour)  // want `^time.NewTimer in workflow`
	_ = time.NewTicker(time.Hour) // want `^time.NewTicker in workflow`
	time.AfterFunc(0, func() {})  // want `^time.AfterFunc in workflow`
	clock := time.Now             // want `^time.Now in workflow`
	_ = clock
	_ = time.Unix(0, 0).Add(time.Hour) // deterministic

	_ = rand.Intn(10)                     // want `^rand.Intn in workflow kinds.fulfil: a replay draws other numbers than the run did; use the context's Random \(ctx.Random\(\)\), which records the number, or draw them in a step and use its result$`
	_ = randv2.IntN(10)                   // want `^rand.IntN in workflow`
	seeded := rand.New(rand.NewSource(1)) // constructors draw nothing
	_ = seeded.Intn(10)                   // want `^\(\*rand.Rand\).Intn in workflow kinds.fulfil: a replay draws other numbers than the run did, unless the source was seeded from the workflow's input; use the context's Random \(ctx.Random\(\)\), draw them in a step, or //stem:allow rand where the seed is deterministic$`
	buf := make([]byte, 8)
	_, _ = crand.Read(buf)                // want `^rand.Read in workflow kinds.fulfil: a replay draws other bytes than the run did; use the context's UUID or Random \(ctx.UUID\(\), ctx.Random\(\)\), or draw them in runtime.SideEffect or a step, which record them$`
	_, _ = io.ReadFull(crand.Reader, buf) // want `^rand.Reader in workflow`

	_ = uuid.New()          // want `^uuid.New in workflow kinds.fulfil: a replay makes another UUID than the run did; use the context's UUID \(ctx.UUID\(\)\), which records it, or make it in runtime.SideEffect or a step$`
	_ = uuid.NewString()    // want `^uuid.NewString in workflow`
	_, _ = uuid.NewRandom() // want `^uuid.NewRandom in workflow`
	_, _ = uuid.NewV7()     // want `^uuid.NewV7 in workflow`
	id, _ := uuid.Parse("00000000-0000-0000-0000-000000000000")
	_ = id.String()

	_ = clocks.Now()        // want `^clocks.Now in workflow kinds.fulfil: a replay reads another time than the run did; use the context's Now`
	_ = clocks.Real{}.Now() // want `^clocks.Real.Now in workflow`
	var clk clocks.Clock = clocks.Real{}
	_ = clk.Now() // want `^clocks.Clock.Now in workflow`
	_ = clocks.NowIn(time.UTC)
	_ = clocks.Epoch(0)
	var own ownClock
	_ = own.Now() // want `^kinds.ownClock.Now in workflow`

	tctx, cancel := context.WithTimeout(context.Background(), time.Second) // want `^context.WithTimeout in workflow kinds.fulfil: the deadline is set from the wall clock, which a replay reads again, and is not recorded; bound a step with its timeout \(timeout= on //stem:step, StepOptions.Timeout\), a wait with its own timeout, or the run with runtime.WithTimeout when starting it$`
	cancel()
	_, cancel = context.WithDeadline(tctx, start) // want `^context.WithDeadline in workflow`
	cancel()
	_, cancel = context.WithCancel(tctx)
	cancel()

	go func() {}() // want `^go statement in workflow kinds.fulfil: the goroutine runs beside the workflow`

	ch := make(chan int, 1)
	ch <- 1  // want `^channel send in workflow kinds.fulfil: what a channel delivers, and when, is not recorded`
	<-ch     // want `^channel receive in workflow`
	select { // want `^select in workflow kinds.fulfil: which case is ready first is not recorded, so a replay may take another; select over futures with the context's Select \(runtime.Select\), which checkpoints the winner$`
	case v := <-ch:
		_ = v
	case ch <- 2:
	}
	close(ch)
	for range ch { // want `^range over a channel in workflow`
	}

	for sku, qty := range order.Items { // want `^range over a map in workflow kinds.fulfil: Go randomizes map order, so a replay may call steps or build results in another order than the run did; range over sorted keys \(slices.Sorted\(maps.Keys\(m\)\)\)$`
		if _, err := ctx.Pack(sku, qty); err != nil {
			return "", err
		}
	}
	for sku := range maps.Keys(order.Items) { // want `^range over maps.Keys in workflow`
		_ = sku
	}

	_, _ = http.Get("http://example.com") // want `^http.Get in workflow kinds.fulfil: files, network, environment and processes are not recorded, so a replay repeats the I/O and may get another answer; move it into a step$`
	_ = os.Getenv("HOME")                 // want `^os.Getenv in workflow`
	_, _ = os.ReadFile("/etc/hosts")      // want `^os.ReadFile in workflow`
	_ = exec.Command("true")              // want `^exec.Command in workflow`
	_, _ = sql.Open("x", "y")             // want `^sql.Open in workflow`
	_ = os.Args                           // want `^os.Args in workflow`
	req, _ := http.NewRequest("GET", "http://example.com", nil)
	_, _ = http.DefaultClient.Do(req) // want `^\(\*http.Client\).Do in workflow`
	_, _ = filepath.Glob("*")         // want `^filepath.Glob in workflow`
	_ = filepath.Join("a", "b")
	_ = http.StatusText(200)
	_ = os.IsNotExist(nil)
	fmt.Println("printing repeats on replay, like logging")
	fmt.Fprintln(os.Stdout, "so does writing to standard output")
	_, _ = os.Stderr.WriteString("and to standard error\n")
	_, _ = os.Stdin.Read(buf) // want `^\(\*os.File\).Read in workflow`

	processed++                            // want `^write to package variable processed in workflow kinds.fulfil: package variables are shared by every run in the process and outlive a replay, which then starts from what other runs left there; keep the state in local variables and step results$`
	lastOrder = order.ID                   // want `^write to package variable lastOrder in workflow`
	cache[order.ID] = 1                    // want `^write to package variable cache in workflow`
	stats.count += 1                       // want `^write to package variable stats in workflow`
	mu.Lock()                              // want `^call of pointer method Lock on package variable mu, which may change it, in workflow`
	p := &processed                        // want `^taking the address of package variable processed, which lets code write it, in workflow`
	http.DefaultClient = nil               // want `^write to package variable http.DefaultClient in workflow`
	for _, lastOrder = range order.Names { // want `^write to package variable lastOrder in workflow`
	}
	_ = p
	_ = cache[order.ID] // reading is fine
	local := 0
	local++

	stamp()
	_ = order.total()
	_ = first([]int{1})
	var sh shipper
	sh.ship()
	return fmt.Sprint(start), nil
}

// stamp is called by Fulfil.
func stamp() time.Time {
	return deep() // reached
}

func deep() time.Time {
	again()
	return time.Now() // want `^time.Now reached from workflow kinds.fulfil via stamp\(\) → deep\(\): a replay reads another time`
}

// again calls itself.
func again() {
	if rand.Intn(2) == 0 { // want `^rand.Intn reached from workflow kinds.fulfil via stamp\(\) → deep\(\) → again\(\)`
		again()
	}
}

func (o Order) total() int {
	t := 0
	for _, q := range o.Items { // integer sum: order-free
		t += q
	}
	for k := range o.Items { // want `^range over a map reached from workflow kinds.fulfil via Order.total\(\)`
		fmt.Println(k)
	}
	return t
}

// first is generic.
func first[T any](xs []T) T {
	go func() {}() // want `^go statement reached from workflow kinds.fulfil via first\(\)`
	return xs[0]
}

// ownClock is a clock interface of the workflow's package.
type ownClock interface{ Now() time.Time }

type shipper struct{}

func (*shipper) ship() {
	_ = os.Getpid() // want `^os.Getpid reached from workflow kinds.fulfil via shipper.ship\(\)`
}

// Refund reaches stamp too; what Fulfil reached is reported once.
//
//stem:workflow name=kinds.refund
func Refund(ctx *FulfilContext, order Order) (string, error) {
	stamp()
	_ = time.Now() // want `^time.Now in workflow kinds.refund`
	return "", nil
}
