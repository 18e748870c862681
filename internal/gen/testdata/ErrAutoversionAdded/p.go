// Package p made step pack autoversion, and step label too, at an
// explicit version, without bumping either: their checkpoint keys change
// from pack@v1 to pack@v1#0, pack@v1#1, ..., so a run in flight would pack
// again under new idempotency keys.
package p

import "github.com/stemflow/stem/runtime"

// Pack packs every item.
//
//stem:workflow name=p.pack
func Pack(ctx *PackContext, items []string) (int, error) {
	for _, it := range items {
		if err := ctx.Pack(it); err != nil {
			return 0, err
		}
		if _, err := ctx.Label(it); err != nil {
			return 0, err
		}
	}
	return len(items), ctx.Seal()
}

//stem:step name=pack autoversion
func Pack1(ctx runtime.StepContext, item string) error { return nil }

//stem:step version=2 name=label autoversion retries=3
func Label(ctx runtime.StepContext, item string) (string, error) { return item, nil }

// Seal stays as it was.
//
//stem:step name=seal
func Seal(ctx runtime.StepContext) error { return nil }
