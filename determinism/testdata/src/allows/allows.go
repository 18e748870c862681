// Package allows has //stem:allow comments that allow nothing. (The
// expectations share their line, so the directives read them as more
// arguments: the analyzer takes their kinds all the same.)
package allows

import (
	"time"

	"github.com/stemflow/stem/runtime"
)

//stem:allow time
var outside = 1 // not in a function body: stemgen reports it as misplaced

// Work is a workflow.
//
//stem:workflow name=allows.work
func Work(ctx *runtime.WorkflowContext, n int) (int, error) {
	x := n + 1     //stem:allow time // want `^//stem:allow time here allows nothing: remove it$`
	_ = time.Now() //stem:allow time rand // want `^//stem:allow time rand: rand here allows nothing: remove it from the comment$`
	//stem:allow goroutine // want `^//stem:allow goroutine here allows nothing: remove it$`
	_ = time.Now() // want `^time.Now in workflow allows.work`
	return x, nil
}

// Step is a step.
//
//stem:step name=step
func Step(ctx runtime.StepContext) error {
	_ = time.Now() //stem:allow time // want `^//stem:allow time here allows nothing: only workflow code is checked, and no workflow reaches this line outside a step; remove it$`
	return nil
}
