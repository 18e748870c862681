package p

import (
	"maps"
	"math/rand"
	"net/http"
	"slices"
	"time"

	"github.com/stemflow/stem/runtime"
)

// Order is the workflow's input.
type Order struct {
	ID    string
	Lines map[string]int
}

var fulfilled int

// Fulfil does what ErrNondeterminism's does, each deliberately: allowed,
// or moved where it belongs.
//
//stem:workflow name=p.fulfil
func Fulfil(ctx *FulfilContext, order Order) (string, error) {
	// Only logged: a replay may log another time.
	started := time.Now() //stem:allow time
	// Seeded from the input, so every replay draws the same.
	r := rand.New(rand.NewSource(int64(len(order.ID))))
	//stem:allow rand
	if r.Intn(10) == 0 {
		return "", nil
	}
	status, err := runtime.Step(ctx.WorkflowContext, "stock@v1", runtime.StepOptions{}, func(sc runtime.StepContext) (string, error) {
		resp, err := http.Get("http://stock.example/" + order.ID)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		return resp.Status, nil
	})
	if err != nil {
		return "", err
	}
	// Logging needs no order.
	go ctx.Logger().Info("fulfilling", "order", order.ID, "stock", status, "started", started) //stem:allow goroutine
	for _, sku := range slices.Sorted(maps.Keys(order.Lines)) {
		if _, err := ctx.Pack(sku, order.Lines[sku]); err != nil {
			return "", err
		}
	}
	total := 0
	for _, qty := range order.Lines {
		total += qty
	}
	fulfilled++ //stem:allow global
	return status, nil
}

// Pack packs a line.
//
//stem:step name=pack autoversion
func Pack(ctx runtime.StepContext, sku string, qty int) (string, error) {
	return sku, nil
}
