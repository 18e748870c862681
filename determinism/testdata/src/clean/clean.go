// Package clean has a workflow with nothing to report: the constructs the
// analyzer reports elsewhere are here in steps, in step literals, in
// functions no workflow reaches, in order-free map ranges, or allowed.
package clean

import (
	"fmt"
	"maps"
	"math/rand"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
)

// Steps holds the steps.
type Steps struct{}

var hits int

// Quote is a step: it may do anything.
//
//stem:step name=quote
func (s *Steps) Quote(ctx runtime.StepContext, n int) (int, error) {
	time.Sleep(time.Millisecond)
	hits++
	go func() {}()
	resp, err := http.Get("http://example.com")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return n + rand.Intn(10), nil
}

// Ship calls the context's methods, runs literals as steps and ranges over
// maps in ways that do not depend on the order.
//
//stem:workflow name=clean.ship
func Ship(ctx *ShipContext, prices map[string]int) (int, error) {
	if err := ctx.Sleep("cool-off", time.Minute); err != nil {
		return 0, err
	}
	if err := ctx.SleepUntil("noon", time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)); err != nil {
		return 0, err
	}
	if _, err := ctx.AwaitReady("ready", time.Hour); err != nil {
		return 0, err
	}
	q, err := ctx.Quote(1)
	if err != nil {
		return 0, err
	}
	now, err := runtime.Step(ctx.WorkflowContext, "now@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (time.Time, error) {
		return time.Now(), nil
	})
	if err != nil {
		return 0, err
	}
	_ = now
	err = runtime.Do(ctx.WorkflowContext, "log@v1", runtime.StepOptions{}, func(sc runtime.StepContext) error {
		_, err := os.ReadFile("/etc/hosts")
		return err
	})
	if err != nil {
		return 0, err
	}
	f := runtime.StepAsync(ctx.WorkflowContext, "draw@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (int, error) {
		return rand.Intn(10), nil
	})
	if _, err := f.Await(); err != nil {
		return 0, err
	}
	runtime.DoAsync(ctx.WorkflowContext, "wait@v1", runtime.StepOptions{}, func(runtime.StepContext) error {
		<-time.After(time.Second)
		return nil
	})
	runtime.DoAsync(ctx.WorkflowContext, "named@v1", runtime.StepOptions{}, namedStep)
	// A literal taking a StepContext is a step's body wherever it goes.
	run(func(sc runtime.StepContext) error {
		hits++
		return nil
	})

	// Order-free map ranges.
	keys := make([]string, 0, len(prices))
	for k := range prices {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var names, upper []string
	for k := range prices {
		names = append(names, k)
		upper = append(upper, strings.ToUpper(k))
	}
	slices.Sort(names)
	sort.Sort(sort.StringSlice(upper))
	total, count := 0, 0
	doubled := map[string]int{}
	seen := map[int]struct{}{}
	for k, v := range prices {
		if v < 0 {
			continue
		}
		total += v
		count++
		doubled[k] = 2 * v
		seen[v] = struct{}{}
	}
	for k, v := range maps.All(prices) {
		doubled[k] += v
	}
	for k := range doubled {
		if k == "" {
			delete(doubled, k)
		}
	}
	for range prices {
		count--
	}
	for _, k := range slices.Sorted(maps.Keys(prices)) {
		fmt.Println(k, prices[k])
	}

	// Deliberate exceptions.
	start := time.Now() //stem:allow time
	// The run's deadline is from the input anyway.
	//stem:allow time rand
	_ = time.Since(start) + time.Duration(rand.Intn(2))
	for k := range prices { //stem:allow map
		fmt.Println(k)
	}

	helper()
	return total + count + q + len(keys) + len(names) + len(upper) + len(seen), nil
}

func namedStep(sc runtime.StepContext) error {
	_ = os.Getenv("HOME")
	return nil
}

func run(fn func(runtime.StepContext) error) error { return fn(nil) }

// helper is reached from Ship and is clean too.
func helper() {
	var local int
	local++
	fmt.Println(local)
}

// notAWorkflow does everything, but no workflow reaches it.
func notAWorkflow() {
	time.Sleep(time.Second)
	hits++
	go func() {}()
	for k := range map[string]int{} {
		fmt.Println(k)
	}
}
