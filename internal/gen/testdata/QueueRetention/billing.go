// Command billing has workflows with a default queue and a retention
// (queue=, retention=), which their generated Register functions pass to
// the runtime. It only registers them: it needs no store that works, so
// the stub below stands in for one.
package main

import (
	"errors"
	"fmt"
	"log"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// Invoice bills an order, on the billing queue; its runs are kept 30 days.
//
//stem:workflow name=billing.invoice queue=billing retention=720h
func Invoice(ctx *InvoiceContext, amount int) (string, error) {
	return fmt.Sprintf("invoice for %d", amount), nil
}

// Audit checks the books; its runs are kept forever.
//
//stem:workflow name=billing.audit version=2 timeout=2h queue=billing.audit-v2_slow retention=forever
func Audit(ctx *AuditContext, year int) (bool, error) {
	return year > 0, nil
}

// Remind nudges a customer; its runs are kept 90 minutes, on the engine's
// default queue.
//
//stem:workflow name=billing.remind retention=90m
func Remind(ctx *RemindContext, customer string) (string, error) {
	return "reminded " + customer, nil
}

// Ping names the engine's default queue outright, and keeps the engine's
// default retention.
//
//stem:workflow name=billing.ping queue=default
func Ping(ctx *PingContext, n int) (int, error) { return n, nil }

// noStore stands in for a store: registering touches none.
type noStore struct{ storage.Store }

func main() {
	e, err := runtime.New(runtime.Config{Store: noStore{}})
	if err != nil {
		log.Fatal(err)
	}
	regs := []struct {
		name     string
		register func(*runtime.Engine) error
	}{
		{InvoiceWorkflowName, RegisterInvoice},
		{AuditWorkflowName, RegisterAudit},
		{RemindWorkflowName, RegisterRemind},
		{PingWorkflowName, RegisterPing},
	}
	for _, r := range regs {
		if err := r.register(e); err != nil {
			log.Fatalf("%s: %v", r.name, err)
		}
		// Registered under its durable name: a second time is refused.
		err := r.register(e)
		fmt.Printf("%s registered, again: %v\n", r.name, errors.Is(err, runtime.ErrDuplicateWorkflow))
	}
}
