// Package p has a workflow that awaits events nothing in its module sends.
package p

import (
	"time"

	"github.com/stemflow/stem/runtime"
)

// Ping is awaited, and nothing sends it.
//
//stem:event topic=p.ping
type Ping struct{}

// Pong is awaited, and only a test sends it.
//
//stem:event topic=p.pong
type Pong struct{}

// Unused is neither awaited nor sent.
//
//stem:event topic=p.unused
type Unused struct{}

// Wait waits for a ping, a pong and a raw topic.
//
//stem:workflow name=p.wait
func Wait(ctx *WaitContext, n int) (int, error) {
	if _, err := ctx.AwaitPing("ping", time.Minute); err != nil {
		return 0, err
	}
	if _, err := ctx.OnPong("pong").Await(); err != nil {
		return 0, err
	}
	if _, err := runtime.WaitForEvent[Ping](ctx.WorkflowContext, "raw", "p.raw", time.Minute); err != nil {
		return 0, err
	}
	return n, nil
}
