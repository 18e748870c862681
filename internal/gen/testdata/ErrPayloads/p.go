package p

import (
	"context"
	"encoding/json"
	"io"
	"time"
	"unsafe"

	"github.com/stemflow/stem/runtime"
)

type NoExported struct{ a, b int }

type Nested struct {
	Items []struct{ Callback func() }
}

type Point struct{ X, Y int }

type BadKey struct{ M map[Point]int }

// OK has only payload-friendly fields: embedded structs without exported
// fields, self-encoding types, ignored fields.
type OK struct {
	noExported
	T    time.Time
	Raw  json.RawMessage
	Skip chan int `json:"-"`
	Self *OK
}

type noExported struct{ x int }

//stem:workflow name=p.w
func W(ctx *WContext, in chan int) (any, error) { return nil, nil }

//stem:step name=s1
func S1(ctx runtime.StepContext, f func(), p unsafe.Pointer, c complex128) error { return nil }

//stem:step name=s2
func S2(ctx runtime.StepContext, n NoExported, nested Nested, bk BadKey, ok OK) (error, error) {
	return nil, nil
}

//stem:step name=s3
func S3(ctx context.Context, r io.Reader, _ map[string][]*NoExported) (*Nested, error) {
	return nil, nil
}

//stem:event topic=p.e
type E struct{ Ch chan int }
