// Package p made step pack a plain step again without bumping it: its
// checkpoint keys change from pack@v1#0, pack@v1#1, ... back to pack@v1,
// so a run in flight would pack again under a new idempotency key.
package p

import "github.com/stemflow/stem/runtime"

// Pack packs the first item.
//
//stem:workflow name=p.pack
func Pack(ctx *PackContext, items []string) (int, error) {
	if err := ctx.Pack(items[0]); err != nil {
		return 0, err
	}
	return 1, nil
}

// Pack1 was autoversion.
//
//stem:step name=pack retries=2
func Pack1(ctx runtime.StepContext, item string) error { return nil }

// Tag stays autoversion.
//
//stem:step name=tag autoversion
func Tag(ctx runtime.StepContext, item string) error { return nil }
