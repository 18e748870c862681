package p

import (
	"math/rand"
	"net/http"
	"time"

	"github.com/stemflow/stem/runtime"
)

// Order is the workflow's input.
type Order struct {
	ID    string
	Lines map[string]int
}

var fulfilled int

// Fulfil reads the clock, draws a number, calls a server, starts a
// goroutine, ranges over a map and counts in a package variable, all
// between steps: go generate fails on each.
//
//stem:workflow name=p.fulfil
func Fulfil(ctx *FulfilContext, order Order) (string, error) {
	started := time.Now()
	if rand.Intn(10) == 0 {
		return "", nil
	}
	resp, err := http.Get("http://stock.example/" + order.ID)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	go ctx.Logger().Info("fulfilling", "order", order.ID)
	for sku, qty := range order.Lines {
		if _, err := ctx.Pack(sku, qty); err != nil {
			return "", err
		}
	}
	fulfilled++
	return started.String(), nil
}

// Pack packs a line.
//
//stem:step name=pack autoversion
func Pack(ctx runtime.StepContext, sku string, qty int) (string, error) {
	return sku, nil
}
